"""simple_switch's own service (`targets/simple_switch/thrift/simple_switch.thrift`):
mirroring sessions, egress queue depths and rates, the switch clock."""
from __future__ import annotations

from .idl import I32, I64, Struct, ThriftError, enum, method, service, struct


class MirroringSessionConfig(Struct):
    fields = ((1, "port", I32), (2, "mgid", I32))


MirroringOperationErrorCode = enum("MirroringOperationErrorCode", SESSION_NOT_FOUND=1)


class InvalidMirroringOperation(ThriftError):
    fields = ((1, "code", I32),)


ERR = ((1, "ouch", InvalidMirroringOperation),)
ID = (1, "mirror_id", I32)

SIMPLE_SWITCH = service(
    method("mirroring_mapping_add", (ID, (2, "egress_port", I32)), I32),
    method("mirroring_mapping_delete", (ID,), I32),
    method("mirroring_mapping_get_egress_port", (ID,), I32),
    method("mirroring_session_add", (ID, (2, "config", struct(MirroringSessionConfig))), None,
           ERR),
    method("mirroring_session_delete", (ID,), None, ERR),
    method("mirroring_session_get", (ID,), struct(MirroringSessionConfig), ERR),
    method("set_egress_priority_queue_depth", ((1, "port_num", I32), (2, "priority", I32),
                                               (3, "depth_pkts", I32)), I32),
    method("set_egress_queue_depth", ((1, "port_num", I32), (2, "depth_pkts", I32)), I32),
    method("set_all_egress_queue_depths", ((1, "depth_pkts", I32),), I32),
    method("set_egress_priority_queue_rate", ((1, "port_num", I32), (2, "priority", I32),
                                              (3, "rate_pps", I64)), I32),
    method("set_egress_queue_rate", ((1, "port_num", I32), (2, "rate_pps", I64)), I32),
    method("set_all_egress_queue_rates", ((1, "rate_pps", I64),), I32),
    method("get_time_elapsed_us", (), I64),
    method("get_time_since_epoch_us", (), I64),
)
