"""A rank program for launch(program=...): rank 0 sends rank 1 frames of an opcode that
collectives own (reliable broadcast, handed whole to Endpoint.receive) with the payload
sizes in the spec's runs; rank 1 writes the payloads it received, in order, as hex."""
from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

from collectives.rank_spec import RankSpec
from collectives.runner import communicator
from collectives.wire import bth
from fabricmodel.rocev2 import RBCAST


def payload(size: int) -> bytes:
    return bytes((i * 7 + size) & 0xFF for i in range(size))


def main(argv: list[str]) -> int:
    spec = RankSpec.read(argv[0])
    sizes = [run["elements"] for run in spec.runs]
    comm = communicator(spec)
    got: list[bytes] = []
    # BTH, payload, ICRC: the handler sees the RoCE part of the packet
    comm.ep.handlers[RBCAST] = lambda data, addr, tos, now: got.append(bytes(data[12:-4]))
    comm.barrier()
    if comm.rank == 0:
        dst = socket.inet_aton(spec.ips[1])
        for size in sizes:
            comm.ep.send_frame(dst, 0xC000, bth(RBCAST, 0, 0) + payload(size), 0)
    else:
        comm.ep.progress_until(lambda: len(got) >= len(sizes), 10.0, "the frames")
    comm.barrier()
    comm.close()
    Path(spec.results).write_text(json.dumps({"rank": comm.rank, "backend": type(comm.ep).__name__,
                                                 "got": [g.hex() for g in got]}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
