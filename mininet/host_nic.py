"""The hosts' NICs as the emulation models them, in each host's kernel qdisc (HTB):

- they send at the link rate: a NIC serialises onto its link, so a posted window waits in its
  sender, not in the leaf's port where every ACK crossing that port would wait behind it;
- packets to different peers take turns, one frame each, as a NIC arbitrates among its
  QPs: with one FIFO, the window a rank posted to one peer held back its packets to the
  others, and in an all-to-all the senders' bursts met at one receiver at a time;
- ACKs, NAKs and CNPs go out ahead of the data queued in the same NIC: an RDMA NIC's
  responder sends them as packets arrive, it does not queue them behind the requester's
  posted window (and NICs give CNPs strict priority). With one FIFO a rank's ACKs to its
  ring predecessor waited behind its own window to its successor, a round trip of two
  windows, which left links idle (README, "The demo").

Both parts of the demo use it (mininet/demo.py, mininet/part2.py)."""
from __future__ import annotations

from report import MTU

from fabricmodel import rocev2

# BTH opcodes that are feedback, not data: their packets take the NIC's first class
FEEDBACK_OPCODES = (rocev2.ACKNOWLEDGE, rocev2.CNP)
FRAME = MTU + 256                # bytes: HTB's burst and quantum, one full frame (headers too)
FEEDBACK_SHARE = 1 / 16          # of the link rate guaranteed to feedback (ACKs use ~1.5 %)


def nic_commands(intf: str, link_mbps: float, peers: list[str]) -> list[str]:
    """tc commands that make `intf` a NIC at `link_mbps`: an HTB root class at the link rate;
    under it feedback first (prio 0), then one class per peer address (prio 1, one frame
    each in turn: a NIC arbitrates among its QPs packet by packet, so a window posted to one
    peer does not hold back the packets to the others) and one for anything else. A u32
    filter picks feedback by its BTH opcode (UDP to 4791, 20-byte IP header), data by its
    destination. The children's guaranteed rates add up to the link rate; each may borrow
    up to all of it."""
    def mbit(x: float) -> str:
        return f"{x:.6g}mbit"

    fb = link_mbps * FEEDBACK_SHARE
    share = (link_mbps - fb) / (len(peers) + 1)
    cls = f"ceil {mbit(link_mbps)} burst {FRAME} cburst {FRAME} quantum {FRAME}"
    cmds = [f"tc qdisc replace dev {intf} root handle 1: htb default 20",
            f"tc class add dev {intf} parent 1: classid 1:1 htb rate {mbit(link_mbps)} {cls}",
            f"tc class add dev {intf} parent 1:1 classid 1:10 htb rate {mbit(fb)} {cls} prio 0"]
    for minor in [20] + [100 + i for i in range(len(peers))]:
        # room for every posted window (the transport's socket buffer is 8 MiB)
        cmds += [f"tc class add dev {intf} parent 1:1 classid 1:{minor} htb "
                 f"rate {mbit(share)} {cls} prio 1",
                 f"tc qdisc add dev {intf} parent 1:{minor} pfifo limit 10000"]
    for op in FEEDBACK_OPCODES:
        cmds.append(f"tc filter add dev {intf} parent 1: protocol ip prio 1 u32 "
                    f"match ip protocol 17 0xff match ip dport {rocev2.ROCEV2_PORT} 0xffff "
                    f"match u8 {op:#x} 0xff at 28 flowid 1:10")
    for i, ip in enumerate(peers):
        cmds.append(f"tc filter add dev {intf} parent 1: protocol ip prio 2 u32 "
                    f"match ip dst {ip}/32 flowid 1:{100 + i}")
    return cmds


def pace_nics(net, topo, link_mbps: float) -> None:
    """Every host's interface becomes a NIC at `link_mbps` (nic_commands); a NIC paced before
    is re-made (an HTB root cannot be replaced in place)."""
    for h in topo.hosts.values():
        node = net.get(h.name)
        if "htb" in node.cmd(f"tc qdisc show dev {h.intf} root"):
            node.cmd(f"tc qdisc del dev {h.intf} root")
        peers = [o.ip for o in topo.hosts.values() if o.name != h.name]
        for cmd in nic_commands(h.intf, link_mbps, peers):
            out = node.cmd(cmd)
            if out.strip():
                raise RuntimeError(f"{h.name}: cannot pace {h.intf} at {link_mbps:g} Mbit/s "
                                   f"({cmd}): {out.strip()}")
