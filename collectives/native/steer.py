"""Keeps the RoCEv2 packets that the native transport reads from its packet ring out of the
kernel's IP stack, which would otherwise route each one, deliver it to the UDP socket that
owns the port and drop it there: a tc ingress program, last on the hook (after the policies'
programs and impair, which see and may drop every packet first), marks UDP packets to the
RoCEv2 port PACKET_OTHERHOST. The ring's packet socket (bound to ETH_P_IP, served after tc
ingress) copies them as before; ip_rcv then drops them first thing. Without it (lo, a host
where it cannot be loaded) every packet still arrives: steering only saves CPU.

22 instructions, assembled here (no compiler: the launcher loads it in a millisecond): frames
with a 20-byte IPv4 header, UDP, not a fragment, to the port."""
from __future__ import annotations

import socket
import struct
import sys
from contextlib import contextmanager

from ebpf import PROGRAMS, TcError, libbpf, tc

# last on the ingress hook: after every program of ebpf/ (the policies' and impair's)
PRIO = max(program.PRIO for program in PROGRAMS.values()) + 10
NAME = "roce_steer"
PACKET_OTHERHOST = 3
BPF_FUNC_SKB_CHANGE_TYPE = 32
TC_ACT_UNSPEC = -1


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, src << 4 | dst, off, imm)


def program(dport: int) -> bytes:
    """The instructions; a 16-bit load reads network order, hence htons on the constants.
    Every test that fails jumps to `pass`, the last two instructions."""
    ldx_w, ldx_h, ldx_b = 0x61, 0x69, 0x71
    mov_x, mov_k, add_k, and_k = 0xBF, 0xB7, 0x07, 0x57
    jgt_x, jne_k, call, exit_ = 0x2D, 0x55, 0x85, 0x95
    body: list[tuple] = [
        (mov_x, 6, 1),                             # r6 = skb
        (ldx_w, 2, 6, 76),                         # r2 = skb->data
        (ldx_w, 3, 6, 80),                         # r3 = skb->data_end
        (mov_x, 4, 2),
        (add_k, 4, 0, 0, 38),                      # Ethernet + IPv4 + UDP ports
        (jgt_x, 4, 3, "pass"),                     # too short
        (ldx_h, 5, 2, 12),
        (jne_k, 5, 0, "pass", socket.htons(0x0800)),   # not IPv4
        (ldx_b, 5, 2, 14),
        (jne_k, 5, 0, "pass", 0x45),               # IP options
        (ldx_b, 5, 2, 23),
        (jne_k, 5, 0, "pass", socket.IPPROTO_UDP),
        (ldx_h, 5, 2, 20),
        (and_k, 5, 0, 0, socket.htons(0x3FFF)),
        (jne_k, 5, 0, "pass", 0),                  # a fragment
        (ldx_h, 5, 2, 36),
        (jne_k, 5, 0, "pass", socket.htons(dport)),
        (mov_x, 1, 6),
        (mov_k, 2, 0, 0, PACKET_OTHERHOST),
        (call, 0, 0, 0, BPF_FUNC_SKB_CHANGE_TYPE),
    ]
    at_pass = len(body)
    body += [(mov_k, 0, 0, 0, TC_ACT_UNSPEC),     # pass: the next filter, then the stack
             (exit_,)]
    return b"".join(
        _insn(*insn[:3], at_pass - pc - 1 if insn[3:4] == ("pass",) else
              (insn[3] if len(insn) > 3 else 0), *insn[4:])
        for pc, insn in enumerate(body))


_loaded: dict[int, int] = {}


def load(dport: int) -> int | None:
    """The program's file descriptor (loaded once per process), None where eBPF is unavailable
    (no libbpf, no privilege, a big-endian host this assembler does not target)."""
    if dport not in _loaded:
        if sys.byteorder != "little":
            return None
        try:
            _loaded[dport] = libbpf.prog_load(libbpf.BPF_PROG_TYPE_SCHED_CLS, NAME,
                                              program(dport))
        except OSError:
            return None
    return _loaded[dport]


@contextmanager
def steered(places: list[tuple[str, str | None]], dport: int):
    """Attaches the program to the ingress of every (interface, namespace) while the block
    runs; where it cannot be attached, packets take the IP stack as before."""
    fd = load(dport)
    done = []
    try:
        for dev, ns in places:
            if fd is None:
                break
            try:
                tc.attach(fd, NAME, dev, "ingress", PRIO, ns)
                done.append((dev, ns))
            except TcError:
                pass
        yield
    finally:
        for dev, ns in done:
            try:
                tc.detach(dev, "ingress", PRIO, ns)
            except TcError:
                pass                  # the namespace is gone already
