"""A tiny SwitchML-style aggregator in Python, standing in for fabric.p4 in the host
protocol test: per slot two versions, each with a worker bitmap, a wrap-around int32 sum and
the kept result; a duplicate contribution to a completed version is answered with the kept
result to that worker only. Results go to every worker by unicast (as the switch's multicast
replicas with unicast rewrites do).

    python py_aggregator.py BIND_IP WORKER_IP...   (runs until killed)
"""
from __future__ import annotations

import socket
import sys

import numpy as np

from collectives import switchml, wire
from fabricmodel import rocev2


def main(bind: str, workers: list[str]) -> None:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((bind, rocev2.ROCEV2_PORT))
    tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    src = socket.inet_aton(bind)
    state: dict[tuple[int, int, int], dict] = {}
    ip_id = 0

    def send(dst: str, roce: bytes) -> None:
        nonlocal ip_id
        ip_id = ip_id % 0xFFFF + 1
        tx.sendto(wire.frame(src, socket.inet_aton(dst), 0xC000, ip_id, 0, roce), (dst, 0))

    while True:
        data = rx.recv(4096)
        try:
            job, slot, seq, worker, n, flags, values = switchml.decode(data)
        except wire.WireError:
            continue
        if flags & rocev2.AGG_FLAG_RESULT or worker >= len(workers):
            continue
        key = (job, slot, flags & rocev2.AGG_FLAG_VERSION)
        st = state.get(key)
        if st is None or st["seq"] != seq:
            st = state[key] = {"seq": seq, "bitmap": 0, "sum": np.zeros(32, dtype=np.int32)}
        done = bin(st["bitmap"]).count("1") == n
        if st["bitmap"] >> worker & 1:
            if done:
                send(workers[worker], switchml.encode(
                    job, slot, seq, worker, n, flags | rocev2.AGG_FLAG_RESULT, st["sum"]))
            continue
        st["bitmap"] |= 1 << worker
        st["sum"] += values
        if bin(st["bitmap"]).count("1") == n:
            for w, ip in enumerate(workers):
                send(ip, switchml.encode(job, slot, seq, w, n, flags | rocev2.AGG_FLAG_RESULT,
                                          st["sum"]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
