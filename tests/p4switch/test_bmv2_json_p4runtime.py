"""A P4Runtime client pushes a BMv2 JSON as p4_device_config (as clients of simple_switch_grpc
do) to `p4switch run`, writes an entry and gets its PacketOut back as a PacketIn."""
from __future__ import annotations

import json
import pathlib

from bmv2_json_docs import cpu_loop
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as p4r
from test_runtime_errors import DEVICE, Client

import p4switch
from p4switch.device.process import SwitchProcess

PROGRAM = pathlib.Path(__file__).parent / "bmv2_json_programs" / "cpu_loop.p4"


def _id(items, name):
    return next(o.preamble.id for o in items if o.preamble.name == name)


def test_bmv2_json_pipeline_config_over_p4runtime_forwards():
    info, _ = p4switch.compile_program(str(PROGRAM))    # the P4Info p4c writes beside the JSON
    config = json.dumps(cpu_loop()).encode()
    with SwitchProcess(["--no-p4", "--device-id", str(DEVICE), "--cpu-port", "510"]) as sw:
        client = Client(sw.grpc_addr, (0, 1))
        assert client.status() == code_pb2.OK
        client.set_pipeline(info, config)
        table = next(t for t in info.tables if t.preamble.name == "I.to_cpu")
        entry = p4r.TableEntry(table_id=table.preamble.id)
        entry.match.add(field_id=table.match_fields[0].id).exact.value = bytes.fromhex("0a0000000001")
        entry.action.action.action_id = _id(info.actions, "I.send_to_cpu")
        entry.action.action.params.add(param_id=1, value=b"\x07")
        client.write(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=entry)))
        frame = bytes.fromhex("0a0000000001" "0a0000000002" "1234") + b"payload"
        out = p4r.StreamMessageRequest()
        out.packet.payload = frame
        out.packet.metadata.add(metadata_id=1, value=b"\x02")
        out.packet.metadata.add(metadata_id=2, value=b"\x00")
        client.out.put(out)
        msg = client.next_message(timeout=20)
        assert msg.WhichOneof("update") == "packet", msg
        assert msg.packet.payload == frame
        assert {m.metadata_id: m.value for m in msg.packet.metadata}[1] == b"\x07"
        assert client.get_pipeline().p4_device_config == config
        client.close()
