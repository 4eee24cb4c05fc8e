"""Packets per second of p4src/fabric.p4 on p4switch, in-process (`sw.process`).

Traffic kinds, measured side by side in one run on one leaf configuration:
  routed      UDP to a remote /24: LPM → ECMP group → crc32 hash → member
  pinned      the same flows, each with an exact path_pin entry
  sprayed     round-robin spraying group (register read/write per packet)
  multicast   one packet to a group of 4 replicas (one input, 3 outputs)
  switchml    SwitchML-style contributions of 4 workers (opcode 0xC0, 32 values: register
              read/add/writes each; every 4th packet completes a slot, multicast to the 4)
  netreduce   NetReduce contributions of 4 workers inside RC connections (256 values per
              1 KiB RDMA WRITE packet; the controller's entries; every 4th packet completes
              a slot and is multicast to the 4 workers as WRITE ONLY with a new ICRC)
"values/s" = aggregated int32 per second (packets/s x values per packet), the rate that
compares the two designs.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "p4src"))

import fabric_testlib as lib  # noqa: E402
from netreduce_job import Job  # noqa: E402  (bench/, beside this script)
from p4.v1 import p4runtime_pb2  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402

import p4switch  # noqa: E402
from collectives import netreduce as nr  # noqa: E402
from p4switch.runtime.pipeline import Pipeline  # noqa: E402

SECONDS = 1.5      # per case, split over ROUNDS interleaved rounds
ROUNDS = 5
FLOWS = 256


def fresh(compiled, mode=0):
    sw = p4switch.load_config(*compiled)
    lib.install_leaf(sw, mode=mode)
    return sw


def routed_packets(n=FLOWS):
    return [(1, lib.udp(lib.host_ip(1), f"10.0.2.{i % 250 + 1}", 0xC000 + i, 4791))
            for i in range(n)]


def setup_pins(sw, packets):
    for _, data in packets:
        pkt = Ether(data)
        sw.table_add("FabricIngress.path_pin", {"hdr.ipv4.srcAddr": lib.ip(pkt[IP].src),
                                          "hdr.ipv4.dstAddr": lib.ip(pkt[IP].dst),
                                          "meta.l4_sport": pkt[UDP].sport,
                                          "meta.l4_dport": pkt[UDP].dport},
                     "FabricIngress.pin_path", {"port": lib.UPLINKS[pkt[UDP].sport % 4]})


def setup_mcast(sw):
    sw.mc_group_create(9, [(p, p) for p in (1, 2, 3, 11)])
    sw.table_add("FabricIngress.mcast_route", {"meta.slice_id": 0,
                                         "hdr.ipv4.dstAddr": lib.ip("239.1.0.9")},
                 "FabricIngress.set_mcast_group", {"group": 9})
    return [(1, lib.udp(lib.host_ip(1), "239.1.0.9", 0xC000 + i, 4791)) for i in range(16)]


def setup_aggregation(sw, workers=4, slots=64):
    sw.mc_group_create(5, [(p, p) for p in range(1, workers + 1)])
    sw.table_add("FabricIngress.mcast_route", {"meta.slice_id": 0,
                                         "hdr.ipv4.dstAddr": lib.ip("239.1.0.5")},
                 "FabricIngress.set_mcast_group", {"group": 5})
    sw.table_add("FabricIngress.switchml_jobs", {"hdr.ipv4.dstAddr": lib.ip("10.0.1.253"),
                                      "hdr.sml.jobId": 7},
                 "FabricIngress.switchml_job", {"gen": 1, "result_ip": lib.ip("239.1.0.5"),
                                               "slot_base": 0, "num_slots": slots,
                                               "num_workers": workers})
    # Slot s is used twice in a row per cycle through the slots, with alternating versions,
    # so the stream never stalls on a completed set.
    packets = []
    for use in range(2):
        for slot in range(slots):
            for w in range(workers):
                packets.append((w + 1, lib.agg(w, [w + slot] * 32, slot=slot, version=use,
                                               num_workers=workers)))
    return packets


class NetReduceStream:
    """The contributions of netreduce_job's 4 workers, 8 packet numbers of each per call, into
    an in-process switch that holds the controller's entries for the job."""

    def __init__(self, compiled):
        info, config = compiled
        self.job = Job()
        self.pipe = Pipeline(p4runtime_pb2.ForwardingPipelineConfig(
            p4info=info, p4_device_config=config), None)
        for update in self.job.updates(info):
            self.pipe.write(update)
        self.sw = self.pipe.sw
        self.g = 0

    def __call__(self):
        batch = [(h.leaf_port, self.job.contribution(r, g))
                 for g in range(self.g, self.g + 8) for r, h in enumerate(self.job.hosts)]
        self.g += 8
        return batch


def timed(sw, packets, seconds):
    """Packets processed and outputs produced in about `seconds` of wall time; `packets` is
    a list sent again and again, or a callable giving the next batch."""
    done = outputs = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch = packets() if callable(packets) else packets
        for port, data in batch:
            outputs += len(sw.process(port, data))
        done += len(batch)
    return done, outputs, time.perf_counter() - start


def main() -> None:
    t0 = time.perf_counter()
    compiled = p4switch.compile_program(str(lib.FABRIC_P4))
    print(f"compiled {lib.FABRIC_P4.relative_to(ROOT)} in {time.perf_counter() - t0:.2f} s")

    cases = []
    sw = fresh(compiled)
    cases.append(("routed (ECMP hash)", sw, routed_packets()))
    sw = fresh(compiled)
    packets = routed_packets()
    setup_pins(sw, packets)
    cases.append((f"pinned ({len(packets)} pins)", sw, packets))
    sw = fresh(compiled, mode=1)
    cases.append(("sprayed (round robin)", sw, routed_packets()))
    sw = fresh(compiled)
    cases.append(("multicast (3 copies)", sw, setup_mcast(sw)))
    sw = fresh(compiled)
    cases.append(("switchml (4 workers, 32 values)", sw, setup_aggregation(sw)))
    stream = NetReduceStream(compiled)
    cases.append(("netreduce (4 workers, 256 values)", stream.sw, stream))
    values = {cases[-2][0]: 32, cases[-1][0]: nr.VALUES}

    # Interleaved rounds, median per case: other load on the machine hits every case alike.
    rates = {name: [] for name, _, _ in cases}
    fanout = {}
    for _ in range(ROUNDS):
        for name, sw, packets in cases:
            done, outputs, elapsed = timed(sw, packets, SECONDS / ROUNDS)
            rates[name].append(done / elapsed)
            fanout[name] = outputs / done
    median = {name: statistics.median(r) for name, r in rates.items()}
    base = median[cases[0][0]]
    print(f"\n{'traffic':<36}{'packets/s':>12}{'outputs/pkt':>13}{'vs routed':>11}"
          f"{'values/s':>12}")
    for name, _, _ in cases:
        rate = f"{median[name] * values[name]:>12,.0f}" if name in values else ""
        print(f"{name:<36}{median[name]:>12,.0f}{fanout[name]:>13.2f}"
              f"{median[name] / base:>10.2f}x{rate}")
    sml, nrd = cases[-2][0], cases[-1][0]
    print(f"\nnetreduce vs switchml: {median[nrd] / median[sml]:.2f}x the packets/s, "
          f"{median[nrd] * values[nrd] / (median[sml] * values[sml]):.2f}x the values/s")


if __name__ == "__main__":
    main()
