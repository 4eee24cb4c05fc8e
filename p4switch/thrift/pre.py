"""The `simple_pre` and `simple_pre_lag` calls: BMv2's two-level multicast model (groups of
L1 nodes, each a replication id with a port map and a LAG map) over P4Runtime multicast group
entries, whose replicas are (port, instance). A group's replicas are its nodes' ports with the
node's rid as instance; a LAG in a node stands for one member port, the lowest (BMv2 picks one
member per packet by a hash, which P4Runtime's replica lists cannot say)."""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from ..runtime.errors import P4RuntimeError
from .bridge import Bridge, HandleMap
from .simple_pre import InvalidMcOperation, McOperationErrorCode, ports_of

Update = p4runtime_pb2.Update
MAX_PORT = 511


def _error(code):
    return InvalidMcOperation(code=getattr(McOperationErrorCode, code))


@dataclass
class Node:
    rid: int
    ports: list[int]
    lags: list[int]


@dataclass
class PreState:
    """Thrift's multicast view of one pipeline: nodes by L1 handle, group -> node handles,
    LAG -> member ports."""
    nodes: HandleMap = field(default_factory=HandleMap)
    node_of: dict[int, Node] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)
    lags: dict[int, list[int]] = field(default_factory=dict)


def _ports(port_map: str, what: str) -> list[int]:
    try:
        ports = ports_of(port_map or "")
    except ValueError:
        raise _error("ERROR") from None
    if ports and ports[-1] > MAX_PORT:
        raise _error("ERROR")
    return ports


class PreCalls:
    """Both PRE services; simple_pre's node calls simply have no LAG map."""

    def __init__(self, bridge: Bridge):
        self.bridge = bridge

    @contextlib.contextmanager
    def _pre(self):
        with self.bridge.pipeline(_error("ERROR")) as state:
            if self.bridge.pre is None:
                self.bridge.pre = PreState()
            yield state, self.bridge.pre

    def _sync(self, state, pre: PreState, gid: int, kind=Update.MODIFY) -> None:
        """Write group `gid`'s replicas as its nodes say."""
        group = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=gid)
        seen = set()
        for handle in pre.groups[gid]:
            node = pre.node_of[handle]
            ports = list(node.ports) + [min(pre.lags[lag]) for lag in node.lags
                                        if pre.lags.get(lag)]
            for port in ports:
                if (port, node.rid) not in seen:        # BMv2 would send a copy per node
                    seen.add((port, node.rid))
                    group.replicas.add(egress_port=port, instance=node.rid)
        try:
            Bridge.write(state, kind, packet_replication_engine_entry=p4runtime_pb2.
                         PacketReplicationEngineEntry(multicast_group_entry=group))
        except P4RuntimeError:
            raise _error("ERROR") from None

    def bm_mc_mgrp_create(self, cxt_id, mgrp):
        with self._pre() as (state, pre):
            if not 0 < mgrp < 1 << 16 or mgrp in pre.groups:
                raise _error("INVALID_MGID")
            pre.groups[mgrp] = []
            try:
                self._sync(state, pre, mgrp, Update.INSERT)
            except InvalidMcOperation:
                del pre.groups[mgrp]
                raise _error("INVALID_MGID") from None
            return mgrp           # BMv2's group handle is the group id

    def bm_mc_mgrp_destroy(self, cxt_id, mgrp_handle):
        with self._pre() as (state, pre):
            if mgrp_handle not in pre.groups:
                raise _error("INVALID_MGRP_HANDLE")
            try:
                Bridge.write(state, Update.DELETE, packet_replication_engine_entry=p4runtime_pb2.
                             PacketReplicationEngineEntry(multicast_group_entry=p4runtime_pb2.
                                                          MulticastGroupEntry(
                                                              multicast_group_id=mgrp_handle)))
            except P4RuntimeError:
                raise _error("ERROR") from None
            del pre.groups[mgrp_handle]

    def bm_mc_node_create(self, cxt_id, rid, port_map, lag_map=None):
        with self._pre() as (state, pre):
            if not 0 <= rid < 1 << 16:
                raise _error("ERROR")
            node = Node(rid, _ports(port_map, "port"), _ports(lag_map, "lag"))
            handle = pre.nodes.add(object())
            pre.node_of[handle] = node
            return handle

    def _node(self, pre, handle):
        if handle not in pre.node_of:
            raise _error("INVALID_L1_HANDLE")
        return pre.node_of[handle]

    def _groups_of(self, pre, handle):
        return [gid for gid, nodes in pre.groups.items() if handle in nodes]

    def bm_mc_node_update(self, cxt_id, l1_handle, port_map, lag_map=None):
        with self._pre() as (state, pre):
            node = self._node(pre, l1_handle)
            node.ports = _ports(port_map, "port")
            node.lags = _ports(lag_map, "lag")
            for gid in self._groups_of(pre, l1_handle):
                self._sync(state, pre, gid)

    def bm_mc_node_associate(self, cxt_id, mgrp_handle, l1_handle):
        with self._pre() as (state, pre):
            if mgrp_handle not in pre.groups:
                raise _error("INVALID_MGRP_HANDLE")
            self._node(pre, l1_handle)
            if self._groups_of(pre, l1_handle):     # BMv2: a node belongs to one group
                raise _error("INVALID_L1_HANDLE")
            pre.groups[mgrp_handle].append(l1_handle)
            self._sync(state, pre, mgrp_handle)

    def bm_mc_node_dissociate(self, cxt_id, mgrp_handle, l1_handle):
        with self._pre() as (state, pre):
            if mgrp_handle not in pre.groups:
                raise _error("INVALID_MGRP_HANDLE")
            if l1_handle not in pre.groups[mgrp_handle]:
                raise _error("INVALID_L1_HANDLE")
            pre.groups[mgrp_handle].remove(l1_handle)
            self._sync(state, pre, mgrp_handle)

    def bm_mc_node_destroy(self, cxt_id, l1_handle):
        with self._pre() as (state, pre):
            self._node(pre, l1_handle)
            for gid in self._groups_of(pre, l1_handle):
                pre.groups[gid].remove(l1_handle)
                self._sync(state, pre, gid)
            del pre.node_of[l1_handle]
            pre.nodes.remove(l1_handle)

    def bm_mc_set_lag_membership(self, cxt_id, lag_index, port_map):
        with self._pre() as (state, pre):
            if lag_index < 0:
                raise _error("ERROR")
            pre.lags[lag_index] = _ports(port_map, "port")
            for gid, nodes in pre.groups.items():
                if any(lag_index in pre.node_of[h].lags for h in nodes):
                    self._sync(state, pre, gid)

    def bm_mc_get_entries(self, cxt_id):
        """BMv2's JSON dump of the PRE: groups, L1 nodes, their L2 port/LAG sets, LAGs."""
        with self._pre() as (state, pre):
            handles = sorted(pre.node_of)
            dump = {
                "mgrps": [{"id": gid, "l1_handles": list(nodes)}
                          for gid, nodes in sorted(pre.groups.items())],
                "l1_handles": [{"handle": h, "rid": pre.node_of[h].rid, "l2_handle": h}
                               for h in handles],
                "l2_handles": [{"handle": h, "ports": pre.node_of[h].ports,
                                "lags": pre.node_of[h].lags} for h in handles],
                "lags": [{"id": lag, "ports": ports} for lag, ports in sorted(pre.lags.items())],
            }
            return json.dumps(dump)
