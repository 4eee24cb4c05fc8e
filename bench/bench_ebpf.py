"""ns/packet of each host eBPF program through BPF_PROG_TEST_RUN, next to an empty tc program
(the floor of the test-run machinery), measured side by side in one run.

Run as root: `.venv/bin/python bench/bench_ebpf.py [--repeat N]`.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scapy.contrib.roce import AETH, BTH  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from collectives.wire import echo_sport  # noqa: E402
from ebpf import Impair, Pin, Reps, Spray  # noqa: E402
from ebpf.libbpf import prog_test_run  # noqa: E402

EMPTY = "int empty(struct __sk_buff *skb) { return -1; }"
TRIALS = 5
PEER, QP, LOCAL_QP = "10.0.0.2", 0x123, 0x456


def data(psn=0, dqpn=QP, payload=1024) -> bytes:
    return bytes(Ether() / IP(src="10.0.0.1", dst=PEER) / UDP(sport=0xC123, dport=4791) /
                 BTH(opcode=0x01, dqpn=dqpn, psn=psn) / Raw(b"\0" * payload))


def ack(entropy) -> bytes:
    """A standard ACK: its UDP source port echoes the acknowledged packet's entropy."""
    return bytes(Ether() / IP(src=PEER, dst="10.0.0.1") / UDP(sport=echo_sport(entropy), dport=4791) /
                 BTH(opcode=0x11, dqpn=LOCAL_QP) / AETH())


def timed(fd: int, packet: bytes, repeat: int) -> float:
    return statistics.median(prog_test_run(fd, packet, repeat).duration_ns
                             for _ in range(TRIALS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200_000,
                        help="test-run repetitions per measurement (default 200000)")
    repeat = parser.parse_args().repeat

    from bcc import BPF
    floor_bpf = BPF(text=EMPTY)
    floor_fd = floor_bpf.load_func(b"empty", BPF.SCHED_CLS).fd

    pin, reps, spray, impair = Pin.load(), Reps.load(), Spray.load(), Impair.load()
    pin.pin(PEER, QP, 0xC000)
    for qp in range(1, 1000):  # a populated table, as on a busy host
        pin.pin(PEER, QP + qp, 0xD000)
    reps.add_connection(PEER, QP, LOCAL_QP, "10.0.0.1", first_window=0)
    spray.configure()
    impair.configure(drop=0.0, duplicate=0.0, udp_dport=4791)
    non_roce = bytes(Ether() / IP(dst=PEER) / UDP(sport=1, dport=53) / Raw(b"\0" * 1024))

    rows = [
        ("empty tc program (floor)", floor_fd, data(5)),
        ("pin: pinned QP (port + ICRC)", pin.prog_fds["egress"], data(5)),
        ("pin: unknown connection", pin.prog_fds["egress"], data(5, dqpn=0x999)),
        ("pin: non-RoCE UDP", pin.prog_fds["egress"], non_roce),
        ("reps egress: data packet", reps.prog_fds["egress"], data(5)),
        ("reps ingress: ECN-free ACK", reps.prog_fds["ingress"], ack(0xC001)),
        ("spray: data packet", spray.prog_fds["egress"], data(5)),
        ("impair: matching, kept", impair.prog_fds["egress"], data(5)),
    ]
    print(f"BPF_PROG_TEST_RUN, {repeat} repetitions x {TRIALS} trials (median), "
          f"1,024-byte payloads")
    print(f"{'program / case':34s} {'ns/pkt':>8s} {'x floor':>8s} {'+ns':>7s}")
    floor = None
    for label, fd, packet in rows:
        ns = timed(fd, packet, repeat)
        floor = floor or ns
        print(f"{label:34s} {ns:8.1f} {ns / floor:8.2f} {ns - floor:7.1f}")
    for prog in (pin, reps, spray, impair):
        prog.close()
    floor_bpf.cleanup()


if __name__ == "__main__":
    main()
