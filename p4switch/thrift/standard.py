"""BMv2's `standard` service (behavioral-model `thrift_src/standard.thrift`): match tables,
action profiles, counters, meters, registers, parser value sets, learning, the device
manager, CRC/Toeplitz parameters and management calls, declared field id by field id."""
from __future__ import annotations

from .idl import (
    BINARY,
    BOOL,
    DOUBLE,
    I16,
    I32,
    I64,
    STRING,
    Struct,
    ThriftError,
    enum,
    list_of,
    map_of,
    method,
    service,
    struct,
)

BmMatchParamType = enum("BmMatchParamType", EXACT=0, LPM=1, TERNARY=2, VALID=3, RANGE=4)


class BmMatchParamExact(Struct):
    fields = ((1, "key", BINARY),)


class BmMatchParamLPM(Struct):
    fields = ((1, "key", BINARY), (2, "prefix_length", I32))


class BmMatchParamTernary(Struct):
    fields = ((1, "key", BINARY), (2, "mask", BINARY))


class BmMatchParamValid(Struct):
    fields = ((1, "key", BOOL),)


class BmMatchParamRange(Struct):
    fields = ((1, "start", BINARY), (2, "end_", BINARY))


class BmMatchParam(Struct):
    fields = ((1, "type", I32), (2, "exact", struct(BmMatchParamExact)),
              (3, "lpm", struct(BmMatchParamLPM)), (4, "ternary", struct(BmMatchParamTernary)),
              (5, "valid", struct(BmMatchParamValid)), (6, "range", struct(BmMatchParamRange)))


class BmAddEntryOptions(Struct):
    fields = ((1, "priority", I32),)


class BmCounterValue(Struct):
    fields = ((1, "bytes", I64), (2, "packets", I64))


class BmMeterRateConfig(Struct):
    fields = ((1, "units_per_micros", DOUBLE), (2, "burst_size", I32))


TableOperationErrorCode = enum(
    "TableOperationErrorCode", TABLE_FULL=1, INVALID_HANDLE=2, EXPIRED_HANDLE=3,
    COUNTERS_DISABLED=4, METERS_DISABLED=5, AGEING_DISABLED=6, INVALID_TABLE_NAME=7,
    INVALID_ACTION_NAME=8, WRONG_TABLE_TYPE=9, INVALID_MBR_HANDLE=10, MBR_STILL_USED=11,
    MBR_ALREADY_IN_GRP=12, MBR_NOT_IN_GRP=13, INVALID_GRP_HANDLE=14, GRP_STILL_USED=15,
    EMPTY_GRP=16, DUPLICATE_ENTRY=17, BAD_MATCH_KEY=18, INVALID_METER_OPERATION=19,
    DEFAULT_ACTION_IS_CONST=20, DEFAULT_ENTRY_IS_CONST=21, NO_DEFAULT_ENTRY=22,
    INVALID_ACTION_PROFILE_NAME=23, NO_ACTION_PROFILE_SELECTION=24,
    IMMUTABLE_TABLE_ENTRIES=25, BAD_ACTION_DATA=26, NO_TABLE_KEY=27, ERROR=100)
CounterOperationErrorCode = enum("CounterOperationErrorCode", INVALID_COUNTER_NAME=1,
                                 INVALID_INDEX=2, ERROR=3)
SwapOperationErrorCode = enum("SwapOperationErrorCode", CONFIG_SWAP_DISABLED=1,
                              ONGOING_SWAP=2, NO_ONGOING_SWAP=3)
MeterOperationErrorCode = enum("MeterOperationErrorCode", INVALID_METER_NAME=1,
                               INVALID_INDEX=2, BAD_RATES_LIST=3, INVALID_INFO_RATE_VALUE=4,
                               INVALID_BURST_SIZE_VALUE=5, ERROR=6)
RegisterOperationErrorCode = enum("RegisterOperationErrorCode", INVALID_REGISTER_NAME=1,
                                  INVALID_INDEX=2, ERROR=3)
ParseVSetOperationErrorCode = enum("ParseVSetOperationErrorCode", INVALID_PARSE_VSET_NAME=1,
                                   ERROR=2)
LearnOperationErrorCode = enum("LearnOperationErrorCode", INVALID_LIST_ID=1,
                               INVALID_LIST_NAME=2, ERROR=3)
DevMgrErrorCode = enum("DevMgrErrorCode", ERROR=1)
CrcErrorCode = enum("CrcErrorCode", INVALID_CALCULATION_NAME=1, WRONG_TYPE_CALCULATION=2,
                    INVALID_CONFIG=3)
ToeplitzHashErrorCode = enum("ToeplitzHashErrorCode", INVALID_CALCULATION_NAME=1,
                             WRONG_TYPE_CALCULATION=2, INVALID_KEY=3)
IdLookupErrorCode = enum("IdLookupErrorCode", INVALID_RESOURCE_TYPE=0, INVALID_RESOURCE_NAME=1)
BmActionEntryType = enum("BmActionEntryType", NONE=0, ACTION_DATA=1, MBR_HANDLE=2,
                         GRP_HANDLE=3)
BmResourceType = enum("BmResourceType", MATCH_TABLE=0, ACTION_PROFILE=1, COUNTER=2, METER=3,
                      REGISTER=4, LEARNING_LIST=5)


def _error(name):
    return type(name, (ThriftError,), {"fields": ((1, "code", I32),)})


InvalidTableOperation = _error("InvalidTableOperation")
InvalidCounterOperation = _error("InvalidCounterOperation")
InvalidSwapOperation = _error("InvalidSwapOperation")
InvalidMeterOperation = _error("InvalidMeterOperation")
InvalidRegisterOperation = _error("InvalidRegisterOperation")
InvalidParseVSetOperation = _error("InvalidParseVSetOperation")
InvalidLearnOperation = _error("InvalidLearnOperation")
InvalidDevMgrOperation = _error("InvalidDevMgrOperation")
InvalidCrcOperation = _error("InvalidCrcOperation")
InvalidToeplitzHashOperation = _error("InvalidToeplitzHashOperation")
InvalidIdLookup = _error("InvalidIdLookup")


class DevMgrPortInfo(Struct):
    fields = ((1, "port_num", I32), (2, "iface_name", STRING), (3, "is_up", BOOL),
              (4, "extra", map_of(STRING, STRING)))


class BmCrc16Config(Struct):
    fields = ((1, "polynomial", I16), (2, "initial_remainder", I16), (3, "final_xor_value", I16),
              (4, "data_reflected", BOOL), (5, "remainder_reflected", BOOL))


class BmCrc32Config(Struct):
    fields = ((1, "polynomial", I32), (2, "initial_remainder", I32), (3, "final_xor_value", I32),
              (4, "data_reflected", BOOL), (5, "remainder_reflected", BOOL))


class BmActionEntry(Struct):
    fields = ((1, "action_type", I32), (2, "action_name", STRING),
              (3, "action_data", list_of(BINARY)), (4, "mbr_handle", I32),
              (5, "grp_handle", I32))


class BmMtEntryLife(Struct):
    fields = ((1, "timeout_ms", I32), (2, "time_since_hit_ms", I32))


class BmMtEntry(Struct):
    fields = ((1, "match_key", list_of(struct(BmMatchParam))),
              (2, "options", struct(BmAddEntryOptions)), (3, "entry_handle", I32),
              (4, "action_entry", struct(BmActionEntry)), (5, "life", struct(BmMtEntryLife)))


class BmMtActProfMember(Struct):
    fields = ((1, "mbr_handle", I32), (2, "action_name", STRING),
              (3, "action_data", list_of(BINARY)))


class BmMtActProfGroup(Struct):
    fields = ((1, "grp_handle", I32), (2, "mbr_handles", list_of(I32)))


class BmConfig(Struct):
    fields = ((1, "device_id", I64), (2, "thrift_port", I32), (3, "notifications_socket", STRING),
              (4, "elogger_socket", STRING), (5, "debugger_socket", STRING))


# argument lists that many methods share
CXT = (1, "cxt_id", I32)
TABLE = (2, "table_name", STRING)
PROF = (2, "act_prof_name", STRING)
KEY = list_of(struct(BmMatchParam))
DATA = list_of(BINARY)
RATES = list_of(struct(BmMeterRateConfig))
OPTIONS = struct(BmAddEntryOptions)
T_ERR = ((1, "ouch", InvalidTableOperation),)
C_ERR = ((1, "ouch", InvalidCounterOperation),)
M_ERR = ((1, "ouch", InvalidMeterOperation),)
R_ERR = ((1, "ouch", InvalidRegisterOperation),)
P_ERR = ((1, "ouch", InvalidParseVSetOperation),)
L_ERR = ((1, "ouch", InvalidLearnOperation),)
S_ERR = ((1, "ouch", InvalidSwapOperation),)
D_ERR = ((1, "ouch", InvalidDevMgrOperation),)
HANDLE = (3, "entry_handle", I32)


def _t(name, args, returns=None):
    return method(name, (CXT, TABLE, *args), returns, T_ERR)


def _p(name, args, returns=None):
    return method(name, (CXT, PROF, *args), returns, T_ERR)


STANDARD = service(
    _t("bm_mt_get_num_entries", (), I64),
    _t("bm_mt_clear_entries", ((3, "reset_default_entry", BOOL),)),
    _t("bm_mt_add_entry", ((3, "match_key", KEY), (4, "action_name", STRING),
                           (5, "action_data", DATA), (6, "options", OPTIONS)), I32),
    _t("bm_mt_set_default_action", ((3, "action_name", STRING), (4, "action_data", DATA))),
    _t("bm_mt_reset_default_entry", ()),
    _t("bm_mt_delete_entry", (HANDLE,)),
    _t("bm_mt_modify_entry", (HANDLE, (4, "action_name", STRING), (5, "action_data", DATA))),
    _t("bm_mt_set_entry_ttl", (HANDLE, (4, "timeout_ms", I32))),
    _p("bm_mt_act_prof_add_member", ((3, "action_name", STRING), (4, "action_data", DATA)), I32),
    _p("bm_mt_act_prof_delete_member", ((3, "mbr_handle", I32),)),
    _p("bm_mt_act_prof_modify_member", ((3, "mbr_handle", I32), (4, "action_name", STRING),
                                        (5, "action_data", DATA))),
    _p("bm_mt_act_prof_create_group", (), I32),
    _p("bm_mt_act_prof_delete_group", ((3, "grp_handle", I32),)),
    _p("bm_mt_act_prof_add_member_to_group", ((3, "mbr_handle", I32), (4, "grp_handle", I32))),
    _p("bm_mt_act_prof_remove_member_from_group", ((3, "mbr_handle", I32),
                                                   (4, "grp_handle", I32))),
    _p("bm_mt_act_prof_get_members", (), list_of(struct(BmMtActProfMember))),
    _p("bm_mt_act_prof_get_member", ((3, "mbr_handle", I32),), struct(BmMtActProfMember)),
    _p("bm_mt_act_prof_get_groups", (), list_of(struct(BmMtActProfGroup))),
    _p("bm_mt_act_prof_get_group", ((3, "grp_handle", I32),), struct(BmMtActProfGroup)),
    _t("bm_mt_indirect_add_entry", ((3, "match_key", KEY), (4, "mbr_handle", I32),
                                    (5, "options", OPTIONS)), I32),
    _t("bm_mt_indirect_modify_entry", (HANDLE, (4, "mbr_handle", I32))),
    _t("bm_mt_indirect_delete_entry", (HANDLE,)),
    _t("bm_mt_indirect_set_entry_ttl", (HANDLE, (4, "timeout_ms", I32))),
    _t("bm_mt_indirect_set_default_member", ((3, "mbr_handle", I32),)),
    _t("bm_mt_indirect_reset_default_entry", ()),
    _t("bm_mt_indirect_ws_add_entry", ((3, "match_key", KEY), (4, "grp_handle", I32),
                                       (5, "options", OPTIONS)), I32),
    _t("bm_mt_indirect_ws_modify_entry", (HANDLE, (4, "grp_handle", I32))),
    _t("bm_mt_indirect_ws_set_default_group", ((3, "grp_handle", I32),)),
    _t("bm_mt_read_counter", (HANDLE,), struct(BmCounterValue)),
    _t("bm_mt_reset_counters", ()),
    _t("bm_mt_write_counter", (HANDLE, (4, "value", struct(BmCounterValue)))),
    _t("bm_mt_set_meter_rates", (HANDLE, (4, "rates", RATES))),
    _t("bm_mt_get_meter_rates", (HANDLE,), RATES),
    _t("bm_mt_get_entries", (), list_of(struct(BmMtEntry))),
    _t("bm_mt_get_entry", (HANDLE,), struct(BmMtEntry)),
    _t("bm_mt_get_default_entry", (), struct(BmActionEntry)),
    _t("bm_mt_get_entry_from_key", ((3, "match_key", KEY), (4, "options", OPTIONS)),
       struct(BmMtEntry)),
    method("bm_counter_read", (CXT, (2, "counter_name", STRING), (3, "index", I32)),
           struct(BmCounterValue), C_ERR),
    method("bm_counter_reset_all", (CXT, (2, "counter_name", STRING)), None, C_ERR),
    method("bm_counter_write", (CXT, (2, "counter_name", STRING), (3, "index", I32),
                                (4, "value", struct(BmCounterValue))), None, C_ERR),
    method("bm_learning_ack", (CXT, (2, "list_id", I32), (3, "buffer_id", I64),
                               (4, "sample_ids", list_of(I32))), None, L_ERR),
    method("bm_learning_ack_buffer", (CXT, (2, "list_id", I32), (3, "buffer_id", I64)),
           None, L_ERR),
    method("bm_learning_set_timeout", (CXT, (2, "list_id", I32), (3, "timeout_ms", I32)),
           None, L_ERR),
    method("bm_learning_set_buffer_size", (CXT, (2, "list_id", I32), (3, "nb_samples", I32)),
           None, L_ERR),
    method("bm_load_new_config", ((1, "config_str", STRING),), None, S_ERR),
    method("bm_swap_configs", (), None, S_ERR),
    method("bm_meter_array_set_rates", (CXT, (2, "meter_array_name", STRING),
                                        (3, "rates", RATES)), None, M_ERR),
    method("bm_meter_set_rates", (CXT, (2, "meter_array_name", STRING), (3, "index", I32),
                                  (4, "rates", RATES)), None, M_ERR),
    method("bm_meter_get_rates", (CXT, (2, "meter_array_name", STRING), (3, "index", I32)),
           RATES, M_ERR),
    method("bm_register_read", (CXT, (2, "register_array_name", STRING), (3, "idx", I32)),
           I64, R_ERR),
    method("bm_register_read_all", (CXT, (2, "register_array_name", STRING)), list_of(I64),
           R_ERR),
    method("bm_register_write", (CXT, (2, "register_array_name", STRING), (3, "index", I32),
                                 (4, "value", I64)), None, R_ERR),
    method("bm_register_write_range", (CXT, (2, "register_array_name", STRING),
                                       (3, "start_index", I32), (4, "end_index", I32),
                                       (5, "value", I64)), None, R_ERR),
    method("bm_register_reset", (CXT, (2, "register_array_name", STRING)), None, R_ERR),
    method("bm_parse_vset_add", (CXT, (2, "parse_vset_name", STRING), (3, "value", BINARY)),
           None, P_ERR),
    method("bm_parse_vset_remove", (CXT, (2, "parse_vset_name", STRING),
                                    (3, "value", BINARY)), None, P_ERR),
    method("bm_parse_vset_get", (CXT, (2, "parse_vset_name", STRING)), list_of(BINARY), P_ERR),
    method("bm_parse_vset_clear", (CXT, (2, "parse_vset_name", STRING)), None, P_ERR),
    method("bm_dev_mgr_add_port", ((1, "iface_name", STRING), (2, "port_num", I32),
                                   (3, "pcap_path", STRING)), None, D_ERR),
    method("bm_dev_mgr_remove_port", ((1, "port_num", I32),), None, D_ERR),
    method("bm_dev_mgr_show_ports", (), list_of(struct(DevMgrPortInfo)), D_ERR),
    method("bm_mgmt_get_info", (), struct(BmConfig)),
    method("bm_set_crc16_custom_parameters", (CXT, (2, "calc_name", STRING),
                                              (3, "crc16_config", struct(BmCrc16Config))),
           None, ((1, "ouch", InvalidCrcOperation),)),
    method("bm_set_crc32_custom_parameters", (CXT, (2, "calc_name", STRING),
                                              (3, "crc32_config", struct(BmCrc32Config))),
           None, ((1, "ouch", InvalidCrcOperation),)),
    method("bm_set_toeplitz_hash_key", (CXT, (2, "calc_name", STRING), (3, "key", BINARY)),
           None, ((1, "ouch", InvalidToeplitzHashOperation),)),
    method("bm_reset_state", ()),
    method("bm_get_config", (), STRING),
    method("bm_get_config_md5", (), BINARY),
    method("bm_get_id_from_name", (CXT, (2, "resource_type", I32), (3, "resource_name", STRING)),
           I32, ((1, "ouch", InvalidIdLookup),)),
    method("bm_serialize_state", (), STRING),
)
