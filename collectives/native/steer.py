"""Keeps the RoCEv2 packets that the native transport reads from its packet ring out of the
kernel's IP stack, which would otherwise route each one, deliver it to the UDP socket that
owns the port and drop it there: a tc ingress program, last on the hook (after the policies'
programs and impair, which see and may drop every packet first), marks UDP packets to the
RoCEv2 port PACKET_OTHERHOST. The ring's packet socket (bound to ETH_P_IP, served after tc
ingress) copies them as before; ip_rcv then drops them first thing. It also gives them a
timestamp (a constant): the ring's socket stamps every frame it copies, and reads the clock
for it only when the packet has no timestamp of its own, which cost 0.3 us per packet here
(`ktime_get_real_ts64` in `tpacket_rcv`, the VM's clock); the transport never reads it, and
sockets that look before tc ingress (taps such as tcpdump) get their own as before. Without
it (lo, a host where it cannot be loaded) every packet still arrives: steering only saves CPU.

25 instructions, assembled here (no compiler: the launcher loads it in a millisecond): frames
with a 20-byte IPv4 header, UDP, not a fragment, to the port."""
from __future__ import annotations

import socket
import struct
import sys
from contextlib import contextmanager

from ebpf import PROGRAMS, TcError, libbpf, tc
from fabricmodel import rocev2

# last on the ingress hook: after every program of ebpf/ (the policies' and impair's)
PRIO = max(program.PRIO for program in PROGRAMS.values()) + 10
NAME = "roce_steer"
PACKET_OTHERHOST = 3
SKB_TSTAMP = 152              # offsetof(struct __sk_buff, tstamp)
RING_TSTAMP = 1               # nanoseconds: any value but 0 (no timestamp)
BPF_FUNC_SKB_CHANGE_TYPE = 32
BPF_FUNC_SKB_LOAD_BYTES = 26
HEADERS_FROM, HEADERS = 12, 26   # the frame's bytes 12..37: EtherType to the UDP ports
TC_ACT_UNSPEC = -1


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, src << 4 | dst, off, imm)


def program(dport: int) -> bytes:
    """The instructions; a 16-bit load reads network order, hence htons on the constants.
    The headers are copied to the stack with bpf_skb_load_bytes, not read in place: the native
    transport's frames come from its TX ring with only the Ethernet header in the skb's linear
    part (the rest in page fragments), which direct packet access cannot see. Every test that
    fails jumps to `pass`, the last two instructions."""
    ldx_h, ldx_b = 0x69, 0x71
    stx_dw, mov_x, mov_k, add_k, and_k = 0x7B, 0xBF, 0xB7, 0x07, 0x57
    jne_k, call, exit_ = 0x55, 0x85, 0x95

    def byte(b: int) -> int:                       # where the frame's byte b is on the stack
        return b - HEADERS_FROM - HEADERS
    body: list[tuple] = [
        (mov_x, 6, 1),                             # r6 = skb
        (mov_k, 2, 0, 0, HEADERS_FROM),            # bytes 12..37: EtherType, IPv4, UDP ports
        (mov_x, 3, 10),
        (add_k, 3, 0, 0, -HEADERS),                # r3 = the stack's last HEADERS bytes
        (mov_k, 4, 0, 0, HEADERS),
        (call, 0, 0, 0, BPF_FUNC_SKB_LOAD_BYTES),  # r1 is still skb
        (jne_k, 0, 0, "pass", 0),                  # too short
        (ldx_h, 5, 10, byte(12)),
        (jne_k, 5, 0, "pass", socket.htons(0x0800)),   # not IPv4
        (ldx_b, 5, 10, byte(14)),
        (jne_k, 5, 0, "pass", 0x45),               # IP options
        (ldx_b, 5, 10, byte(23)),
        (jne_k, 5, 0, "pass", socket.IPPROTO_UDP),
        (ldx_h, 5, 10, byte(20)),
        (and_k, 5, 0, 0, socket.htons(rocev2.IPV4_FRAG_BITS)),
        (jne_k, 5, 0, "pass", 0),                  # a fragment
        (ldx_h, 5, 10, byte(36)),
        (jne_k, 5, 0, "pass", socket.htons(dport)),
        (mov_k, 5, 0, 0, RING_TSTAMP),
        (stx_dw, 6, 5, SKB_TSTAMP),                # skb->tstamp = RING_TSTAMP
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
