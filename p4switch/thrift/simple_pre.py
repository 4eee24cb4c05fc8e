"""BMv2's packet replication engine services (`thrift_src/simple_pre.thrift` and
`simple_pre_lag.thrift`): multicast groups, L1 nodes (rid + port map), LAG membership. Port and
LAG maps travel as strings of '0'/'1', the last character being port 0."""
from __future__ import annotations

from .idl import I16, I32, STRING, ThriftError, enum, method, service

McOperationErrorCode = enum("McOperationErrorCode", TABLE_FULL=1, INVALID_MGID=2,
                            INVALID_MGRP_HANDLE=3, INVALID_L1_HANDLE=4, ERROR=5)


class InvalidMcOperation(ThriftError):
    fields = ((1, "code", I32),)


CXT = (1, "cxt_id", I32)
ERR = ((1, "ouch", InvalidMcOperation),)


def _methods(lag: bool):
    lag_map = ((4, "lag_map", STRING),) if lag else ()
    methods = [
        method("bm_mc_mgrp_create", (CXT, (2, "mgrp", I32)), I32, ERR),
        method("bm_mc_mgrp_destroy", (CXT, (2, "mgrp_handle", I32)), None, ERR),
        method("bm_mc_node_create", (CXT, (2, "rid", I32), (3, "port_map", STRING), *lag_map),
               I32, ERR),
        method("bm_mc_node_associate", (CXT, (2, "mgrp_handle", I32), (3, "l1_handle", I32)),
               None, ERR),
        method("bm_mc_node_dissociate", (CXT, (2, "mgrp_handle", I32), (3, "l1_handle", I32)),
               None, ERR),
        method("bm_mc_node_destroy", (CXT, (2, "l1_handle", I32)), None, ERR),
        method("bm_mc_node_update", (CXT, (2, "l1_handle", I32), (3, "port_map", STRING),
                                     *lag_map), None, ERR),
        method("bm_mc_get_entries", (CXT,), STRING, ERR),
    ]
    if lag:
        methods.append(method("bm_mc_set_lag_membership", (CXT, (2, "lag_index", I16),
                                                           (3, "port_map", STRING)), None, ERR))
    return service(*methods)


SIMPLE_PRE = _methods(lag=False)
SIMPLE_PRE_LAG = _methods(lag=True)


def ports_of(port_map: str) -> list[int]:
    """'0101' -> [0, 2]; anything but 0/1 is an error (ValueError)."""
    if port_map.strip("01"):
        raise ValueError(f"port map '{port_map}' is not a string of 0 and 1")
    return [i for i, c in enumerate(reversed(port_map)) if c == "1"]


def port_map_of(ports) -> str:
    ports = sorted(set(ports))
    if not ports:
        return ""
    return "".join("1" if p in ports else "0" for p in range(ports[-1], -1, -1))
