"""`standard`'s management calls: switch info, the program JSON and its md5, resetting
state, id lookup, ports; and the calls whose BMv2 mechanism p4switch replaces (learning over
nanomsg, JSON swaps, custom CRCs, adding ports at run time), which answer with their error."""
from __future__ import annotations

import hashlib
import json

from p4.v1 import p4runtime_pb2

from .bridge import Bridge
from .program_json import served_json
from .standard import (
    BmConfig,
    CrcErrorCode,
    DevMgrErrorCode,
    DevMgrPortInfo,
    IdLookupErrorCode,
    InvalidCrcOperation,
    InvalidDevMgrOperation,
    InvalidIdLookup,
    InvalidLearnOperation,
    InvalidSwapOperation,
    InvalidToeplitzHashOperation,
    LearnOperationErrorCode,
    SwapOperationErrorCode,
    ToeplitzHashErrorCode,
)

# BmResourceType -> where the served JSON lists objects of that type
_RESOURCE_LISTS = {0: ("pipelines", "tables"), 1: ("pipelines", "action_profiles"),
                   2: ("counter_arrays",), 3: ("meter_arrays",), 4: ("register_arrays",),
                   5: ("learn_lists",)}


class _NoPipeline(Exception):
    pass


class ManagementCalls:
    bridge: Bridge
    thrift_port: int

    def _json(self) -> str:
        with self.bridge.pipeline(_NoPipeline()) as state:
            if state.program_json is None:
                state.program_json = served_json(state.pipeline)
            return state.program_json

    def bm_mgmt_get_info(self):
        return BmConfig(device_id=self.bridge.device_id, thrift_port=self.thrift_port)

    def bm_get_config(self):
        try:
            return self._json()
        except _NoPipeline:          # no pipeline: BMv2 answers an empty config
            return ""

    def bm_get_config_md5(self):
        return hashlib.md5(self.bm_get_config().encode()).digest()

    def bm_reset_state(self):
        """Every entry, member, group, PRE entry and extern back to the program's initial
        state, the program kept: the running config is installed again."""
        with self.bridge.service.device.lock:
            pipeline = self.bridge.service.pipeline
            if pipeline is not None:
                config = p4runtime_pb2.ForwardingPipelineConfig()
                config.CopyFrom(pipeline.config)
                self.bridge.service.commit(config)

    def bm_get_id_from_name(self, cxt_id, resource_type, resource_name):
        path = _RESOURCE_LISTS.get(resource_type)
        if path is None:
            raise InvalidIdLookup(code=IdLookupErrorCode.INVALID_RESOURCE_TYPE)
        data = json.loads(self.bm_get_config() or "{}")
        objects = data.get(path[0], [])
        if len(path) == 2:
            objects = [o for p in objects for o in p.get(path[1], [])]
        for obj in objects:
            if obj.get("name") == resource_name:
                return obj["id"]
        raise InvalidIdLookup(code=IdLookupErrorCode.INVALID_RESOURCE_NAME)

    def bm_serialize_state(self):
        raise NotImplementedError("p4switch does not serialize BMv2 state; read it over "
                                  "P4Runtime")

    # --- ports -----------------------------------------------------------------------------
    def bm_dev_mgr_show_ports(self):
        ports = self.bridge.service.device.ports
        out = []
        for number in sorted(ports):
            name = ports[number].ifname
            try:
                up = bool(open(f"/sys/class/net/{name}/operstate").read().strip() == "up")
            except OSError:
                up = False
            out.append(DevMgrPortInfo(port_num=number, iface_name=name, is_up=up, extra={}))
        return out

    def bm_dev_mgr_add_port(self, iface_name, port_num, pcap_path):
        """Ports are fixed at start (-i PORT@IF) in p4switch."""
        raise InvalidDevMgrOperation(code=DevMgrErrorCode.ERROR)

    def bm_dev_mgr_remove_port(self, port_num):
        raise InvalidDevMgrOperation(code=DevMgrErrorCode.ERROR)

    # --- what P4Runtime or the command line does instead ------------------------------------
    def bm_learning_ack(self, cxt_id, list_id, buffer_id, sample_ids):
        raise InvalidLearnOperation(code=LearnOperationErrorCode.INVALID_LIST_ID)

    def bm_learning_ack_buffer(self, cxt_id, list_id, buffer_id):
        raise InvalidLearnOperation(code=LearnOperationErrorCode.INVALID_LIST_ID)

    def bm_learning_set_timeout(self, cxt_id, list_id, timeout_ms):
        raise InvalidLearnOperation(code=LearnOperationErrorCode.INVALID_LIST_ID)

    def bm_learning_set_buffer_size(self, cxt_id, list_id, nb_samples):
        raise InvalidLearnOperation(code=LearnOperationErrorCode.INVALID_LIST_ID)

    def bm_load_new_config(self, config_str):
        raise InvalidSwapOperation(code=SwapOperationErrorCode.CONFIG_SWAP_DISABLED)

    def bm_swap_configs(self):
        raise InvalidSwapOperation(code=SwapOperationErrorCode.CONFIG_SWAP_DISABLED)

    def bm_set_crc16_custom_parameters(self, cxt_id, calc_name, crc16_config):
        raise InvalidCrcOperation(code=CrcErrorCode.INVALID_CALCULATION_NAME)

    def bm_set_crc32_custom_parameters(self, cxt_id, calc_name, crc32_config):
        raise InvalidCrcOperation(code=CrcErrorCode.INVALID_CALCULATION_NAME)

    def bm_set_toeplitz_hash_key(self, cxt_id, calc_name, key):
        raise InvalidToeplitzHashOperation(code=ToeplitzHashErrorCode.INVALID_CALCULATION_NAME)
