"""Run-time queue control independent of P4Runtime (`--control-socket PATH`): a Unix stream
socket taking one command per line, answering one line per command.

    set_queue_rate <port|all> <rate>          (packets/s, or with a unit: 500pps, 10mbps;
                                               0 = unlimited)
    set_queue_depth <port|all> <packets>
    show_queues                               (port depth rate occupancy enqueued dropped ...)
    fidelity [T0 T1]                          (port lost_s longest_s episodes partial ...:
                                               the pacing monitor's link time lost within
                                               the CLOCK_MONOTONIC window [T0, T1] s,
                                               default: since the switch started)

Client: `python -m p4switch.device.control PATH set_queue_rate 2 1000`."""
from __future__ import annotations

import math
import os
import socket
import sys
import threading

from .traffic_manager import TrafficManager, parse_rate


def execute(tm: TrafficManager, line: str) -> str:
    words = line.split()
    if not words:
        return "error: empty command"
    cmd, args = words[0], words[1:]
    try:
        if cmd in ("set_queue_rate", "set_queue_depth") and len(args) == 2:
            port = None if args[0] == "all" else int(args[0])
            if cmd == "set_queue_rate":
                tm.set_rate(port, *parse_rate(args[1]))
            else:
                tm.set_depth(port, int(args[1]))
            return "ok"
        if cmd == "show_queues" and not args:
            rows = [f"{p} {d} {r:g}{unit} {occ} {enq} {drop}"
                    for p, (d, r, unit, occ, enq, drop) in tm.snapshot().items()]
            return " | ".join(["port depth rate occupancy enqueued dropped", *rows])
        if cmd == "fidelity" and len(args) in (0, 2):
            t0, t1 = (float(a) for a in args) if args else (0.0, math.inf)
            if not t0 <= t1:
                raise ValueError(f"fidelity window [{args[0]}, {args[1]}] ends before it starts")
            rows = [f"{p} {lost:.6f} {longest:.6f} {n} {int(partial)}"
                    for p, (lost, longest, n, partial) in tm.fidelity(t0, t1).items()]
            return " | ".join(["port lost_s longest_s episodes partial", *rows])
    except ValueError as exc:
        return f"error: {exc}"
    return f"error: unknown command or wrong arguments: {line.strip()!r}"


class ControlServer:
    def __init__(self, path: str, tm: TrafficManager):
        self.path, self.tm = path, tm
        if os.path.exists(path):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(4)
        threading.Thread(target=self._serve, name="control", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn, conn.makefile("rw") as f:
                for line in f:
                    f.write(execute(self.tm, line) + "\n")
                    f.flush()

    def close(self) -> None:
        self.sock.close()
        if os.path.exists(self.path):
            os.unlink(self.path)


def send_command(path: str, command: str, timeout: float = 5.0) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        with s.makefile("rw") as f:
            f.write(command.strip() + "\n")
            f.flush()
            return f.readline().strip()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m p4switch.device.control SOCKET COMMAND [ARGS...]")
    reply = send_command(sys.argv[1], " ".join(sys.argv[2:]))
    print(reply.replace(" | ", "\n"))
    sys.exit(1 if reply.startswith("error") else 0)
