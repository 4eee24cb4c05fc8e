"""The hosts' NICs as the emulation models them, in each host's kernel qdisc (HTB):

- they send at the link rate: a NIC serialises onto its link, so a posted window waits in its
  sender, not in the leaf's port where every ACK crossing that port would wait behind it;
- ACKs, NAKs and CNPs go out ahead of the data queued in the same NIC: an RDMA NIC's
  responder sends them as packets arrive, it does not queue them behind the requester's
  posted window (and NICs give CNPs strict priority). With one FIFO a rank's ACKs to its
  ring predecessor waited behind its own window to its successor, a round trip of two
  windows, which left links idle (README, "The demo").

Both parts of the demo use it (mininet/demo.py, mininet/part2.py)."""
from __future__ import annotations

from fabricmodel import rocev2

# BTH opcodes that are feedback, not data: their packets take the NIC's first class
FEEDBACK_OPCODES = (rocev2.ACKNOWLEDGE, rocev2.CNP)
FRAME = 1600                     # bytes: HTB's burst and quantum, one full frame


def nic_commands(intf: str, link_mbps: float) -> list[str]:
    """tc commands that make `intf` a paced NIC sending feedback first: an HTB root class at
    the link rate with two children, feedback (prio 0) and everything else (prio 1); a u32
    filter picks RoCEv2 packets (UDP to 4791, 20-byte IP header) by their BTH opcode."""
    rate = f"{link_mbps:g}mbit"
    cls = f"rate {rate} ceil {rate} burst {FRAME} cburst {FRAME} quantum {FRAME}"
    cmds = [f"tc qdisc replace dev {intf} root handle 1: htb default 20",
            f"tc class add dev {intf} parent 1: classid 1:1 htb {cls}",
            f"tc class add dev {intf} parent 1:1 classid 1:10 htb {cls} prio 0",
            f"tc class add dev {intf} parent 1:1 classid 1:20 htb {cls} prio 1",
            # room for every posted window (the transport's socket buffer is 8 MiB)
            f"tc qdisc add dev {intf} parent 1:20 pfifo limit 10000"]
    for op in FEEDBACK_OPCODES:
        cmds.append(f"tc filter add dev {intf} parent 1: protocol ip prio 1 u32 "
                    f"match ip protocol 17 0xff match ip dport {rocev2.ROCEV2_PORT} 0xffff "
                    f"match u8 {op:#x} 0xff at 28 flowid 1:10")
    return cmds


def pace_nics(net, topo, link_mbps: float) -> None:
    """Every host's interface becomes a NIC at `link_mbps` (nic_commands)."""
    for h in topo.hosts.values():
        node = net.get(h.name)
        for cmd in nic_commands(h.intf, link_mbps):
            out = node.cmd(cmd)
            if out.strip():
                raise RuntimeError(f"{h.name}: cannot pace {h.intf} at {link_mbps:g} Mbit/s "
                                   f"({cmd}): {out.strip()}")
