"""fabric.p4 on `p4switch run --backend native`: P4Runtime writes tables, counters, registers
and multicast groups while a stream of packets flows through the switch; every packet of the
stream arrives, in order (the writes go into native state between two packet batches)."""
from __future__ import annotations

import socket
import threading
import time

import p4runtime_sh.shell as sh
import pytest
from p4.v1 import p4runtime_pb2
from p4rt_fabric import fabric_switch, veth_pairs
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4switch.native import available

pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(not available(), reason="no C compiler (cc) for the native backend")]
ETH_P_ALL = 0x0003
COUNT = 3000           # at least this many packets, and the stream lasts until the writes are done
RATE = 1500            # packets/s: well inside what the host's sender and receiver keep up with
WRITES = 10            # write rounds that must fall inside the stream, however slow the machine
DEADLINE = 120.0       # seconds; a switch that stalls the writes fails here instead of hanging


def _frame(seq):
    return bytes(Ether(src="02:00:0a:00:01:01", dst="02:01:00:01:00:01")
                 / IP(src="10.0.1.1", dst="10.0.1.2") / UDP(sport=0xC000, dport=5000)
                 / (b"native-seq" + seq.to_bytes(4, "big") + bytes(32)))


def _entry(table, action, match, **params):
    te = sh.TableEntry(table)(action=action)
    for k, v in match.items():
        te.match[k] = v
    for k, v in params.items():
        te.action[k] = str(v)
    return te


def _register_id(name):
    (rid,) = [r.preamble.id for r in sh.context.p4info.registers if r.preamble.name == name]
    return rid


def _register_write(name, index, value, width_bytes):
    reg = p4runtime_pb2.RegisterEntry(register_id=_register_id(name))
    reg.index.index = index
    reg.data.bitstring = value.to_bytes(width_bytes, "big")
    update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    update.entity.register_entry.CopyFrom(reg)
    sh.client.write_update(update)


def _register_read(name, index):
    reg = p4runtime_pb2.RegisterEntry(register_id=_register_id(name))
    reg.index.index = index
    entity = p4runtime_pb2.Entity(register_entry=reg)
    for response in sh.client.read_one(entity):
        for e in response.entities:
            return int.from_bytes(e.register_entry.data.bitstring, "big")
    return None


def test_writes_while_traffic_flows_lose_and_reorder_nothing(tmp_path):
    macs = {port: (f"02:01:00:01:00:{port:02x}", f"02:00:0a:00:01:{port:02x}") for port in (2, 3)}
    with veth_pairs("n") as veths, fabric_switch("p4switch-native", veths, tmp_path, macs):
        _entry("FabricIngress.ipv4_route", "FabricIngress.route_to_port",
               {"meta.slice_id": "0", "hdr.ipv4.dstAddr": "10.0.1.2/32"}, port=2).insert()

        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        rx.bind((veths[1][1], 0))
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        rx.settimeout(0.2)
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((veths[0][1], 0))
        seen, sent, done, stop = [], [0], threading.Event(), threading.Event()

        def receive():
            """Until the sender is done and as many frames came out as it sent (within 60 s
            of its end: a busy machine can hold the switch back for seconds, so only a loss
            meets this deadline), then 0.5 s of quiet for one too many."""
            last = ended = None
            while True:
                try:
                    frame, addr = rx.recvfrom(4096)
                except TimeoutError:
                    if done.is_set():
                        now = time.monotonic()
                        ended = ended or now
                        if len(seen) >= sent[0] and now - (last or ended) > 0.5 or \
                                now - ended > 60:
                            return
                    continue
                at = frame.find(b"native-seq")
                if addr[2] != socket.PACKET_OUTGOING and at >= 0:
                    seen.append(int.from_bytes(frame[at + 10:at + 14], "big"))
                    last = time.monotonic()

        def send():
            start = time.monotonic()
            seq = 0
            while seq < COUNT or not stop.is_set():
                tx.send(_frame(seq))
                seq += 1
                sent[0] = seq
                ahead = seq / RATE - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
            done.set()

        receiver = threading.Thread(target=receive)
        sender = threading.Thread(target=send)
        receiver.start()
        sender.start()
        writes = 0
        deadline = time.monotonic() + DEADLINE
        # The stream stops only after WRITES complete rounds, so every round overlaps it.
        while (writes < WRITES or sent[0] < COUNT) and time.monotonic() < deadline:
            other = _entry("FabricIngress.ipv4_route", "FabricIngress.route_to_port",
                           {"meta.slice_id": "0", "hdr.ipv4.dstAddr": f"10.0.9.{writes % 200}/32"},
                           port=3)
            other.insert()
            _entry("FabricIngress.ipv4_route", "FabricIngress.route_to_port",
                   {"meta.slice_id": "0", "hdr.ipv4.dstAddr": "10.0.1.2/32"}, port=2).modify()
            other.delete()
            counter = sh.CounterEntry("FabricIngress.port_drops")
            counter.index = 5
            counter.packet_count, counter.byte_count = writes, 0
            counter.modify()
            _register_write("FabricIngress.spray_rr", 3, writes & 0xFFFF, 2)
            group = sh.MulticastGroupEntry(100 + writes % 50).add(3, 1)
            group.insert()
            group.delete()
            writes += 1
        stop.set()
        sender.join()
        receiver.join()
        rx.close()
        tx.close()
        assert writes >= WRITES, f"only {writes} write rounds in {DEADLINE:.0f} s"
        assert seen == list(range(sent[0])), (len(seen), sent[0],
                                              [s for s in range(sent[0]) if s not in set(seen)][:10])
        assert _register_read("FabricIngress.spray_rr", 3) == (writes - 1) & 0xFFFF
        counter = sh.CounterEntry("FabricIngress.port_drops")
        counter.index = 5
        (read,) = list(counter.read())
        assert read.packet_count == writes - 1
