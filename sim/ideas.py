"""Multicast Allgather and NetReduce at scale: link traversals and CCT next to their ring
baselines, with the trees and the aggregating switch chosen by the controller's planners
(`controller/multicast.py`, `controller/aggregation.py`).

Link traversals are payload bytes summed over every directed link (host links included)
divided by the bytes one rank contributes: what the Multicast Allgather paper counts. The
formulas beside them follow from the topology alone, so a test can hold the simulator to them.
"""
from __future__ import annotations

import time

from controller.aggregation import AggregationPlanner
from controller.multicast import MulticastPlanner
from fabricmodel.routing import Routing
from fabricmodel.topology import Topology
from sim.collective import Run
from sim.fabric import LinkSpec, SimFabric, Transport, ip_int


def _hops(topo: Topology, a: str, b: str) -> int:
    """Links between two hosts on a shortest path (2 under one leaf)."""
    la, lb = topo.host(a).leaf, topo.host(b).leaf
    if la == lb:
        return 2
    return 2 + len(Routing(topo).paths(la, lb)[0].hops)


def ring_allgather_traversals(topo: Topology) -> int:
    """Shard-traversals of ring Allgather: each shard goes n-1 times to the next rank."""
    hosts = [topo.host_by_rank(r).name for r in range(len(topo.hosts))]
    n = len(hosts)
    return (n - 1) * sum(_hops(topo, hosts[r], hosts[(r + 1) % n]) for r in range(n))


def multicast_traversals(topo: Topology, tree_links: int) -> int:
    """Shard-traversals of Multicast Allgather: each shard crosses its sender's host link,
    every tree link once and every other member's host link once."""
    n = len(topo.hosts)
    return n * (n + tree_links)


def ring_allreduce_traversals(topo: Topology) -> float:
    """Buffer-traversals of ring all-reduce: 2(n-1) steps of 1/n of the buffer per rank."""
    hosts = [topo.host_by_rank(r).name for r in range(len(topo.hosts))]
    n = len(hosts)
    return 2 * (n - 1) / n * sum(_hops(topo, hosts[r], hosts[(r + 1) % n]) for r in range(n))


def netreduce_traversals(topo: Topology, agg_leaf: str, tree_links: int) -> int:
    """Buffer-traversals of NetReduce: each worker's buffer goes to the aggregating leaf
    (1 link if under it, else up and down through a spine), the sum comes back on the result
    tree (every tree link and every worker's host link once)."""
    up = sum(1 if h.leaf == agg_leaf else _hops(topo, h.name, topo.hosts_of(agg_leaf)[0].name) - 1
             for h in topo.hosts.values())
    return up + len(topo.hosts) + tree_links


def _traversals(fab: SimFabric, unit: int) -> float:
    return sum(fab.fabric_loads().values()) / unit


def multicast_allgather(topo: Topology, shard: int, link: LinkSpec, transport: Transport) -> list[dict]:
    """Ring Allgather (ECMP) and Multicast Allgather (every rank multicasts its shard, two roots
    at a time) of `shard` bytes per rank."""
    n = len(topo.hosts)
    ring = Run(topo, "ring-allgather", shard * n, "ecmp", link=link, transport=transport)
    start = time.perf_counter()
    row = ring.run()
    rows = [{"idea": "multicast-allgather", "run": "ring (baseline)", "hosts": n,
             "shard_bytes": shard, "cct_s": row["cct_s"], "ok": row["ok"],
             "traversals": _traversals(ring.fab, shard),
             "formula": ring_allgather_traversals(topo), "wall_s": time.perf_counter() - start}]
    members = [topo.host_by_rank(r).name for r in range(n)]
    group = MulticastPlanner(topo).create("sim", "allgather", members)
    fab = SimFabric(topo, link, transport)
    gip = ip_int(group.group_ip)
    for sw, replicas in group.replicas.items():
        fab.engine.add_mcast(gip, fab.index[sw], [r.port for r in replicas])
    slot = (58 + transport.mtu) * 8 / link.bps * -(-shard // transport.mtu)
    for r in range(n):            # two roots at a time: the token passes every shard time
        fab.engine.mcast_send(r, gip, shard, transport.mtu, (r // 2) * slot)
    start = time.perf_counter()
    fab.run()
    got = [int(fab.engine.host_rx_bytes(r)) for r in range(n)]
    rows.append({"idea": "multicast-allgather", "run": f"multicast {group.group_ip}",
                 "hosts": n, "shard_bytes": shard, "cct_s": fab.engine.last_rx_at(),
                 "ok": all(g == shard * (n - 1) for g in got),
                 "traversals": _traversals(fab, shard),
                 "formula": multicast_traversals(topo, len(group.tree_links)),
                 "wall_s": time.perf_counter() - start})
    fab.close()
    return rows


def netreduce(topo: Topology, size: int, link: LinkSpec, transport: Transport) -> list[dict]:
    """Ring all-reduce (ECMP) and NetReduce (the aggregating leaf sums every worker's packets
    and multicasts the sum) of `size` bytes per rank."""
    n = len(topo.hosts)
    start = time.perf_counter()
    ring = Run(topo, "ring", size, "ecmp", link=link, transport=transport)
    row = ring.run()
    rows = [{"idea": "netreduce", "run": "ring all-reduce (baseline)", "hosts": n,
             "size_bytes": size, "cct_s": row["cct_s"], "ok": row["ok"],
             "traversals": _traversals(ring.fab, size),
             "formula": ring_allreduce_traversals(topo),
             "wall_s": time.perf_counter() - start}]
    members = [topo.host_by_rank(r).name for r in range(n)]
    job = AggregationPlanner(topo, MulticastPlanner(topo)).create(1, members, 64)
    fab = SimFabric(topo, link, transport)
    gip = ip_int(job.result_group.group_ip)
    for sw, replicas in job.result_group.replicas.items():
        fab.engine.add_mcast(gip, fab.index[sw], [r.port for r in replicas])
    fab.engine.set_agg(fab.index[job.leaf], ip_int(job.aggregator_ip),
                       [ip_int(w.ip) for w in job.workers], gip)
    for r in range(n):
        fab.engine.agg_send(r, ip_int(job.aggregator_ip), size, transport.mtu, 0.0)
    start = time.perf_counter()
    fab.run()
    got = [int(fab.engine.host_rx_bytes(r)) for r in range(n)]
    rows.append({"idea": "netreduce", "run": f"NetReduce in {job.leaf}", "hosts": n,
                 "size_bytes": size, "cct_s": fab.engine.last_rx_at(),
                 "ok": all(g == size for g in got), "traversals": _traversals(fab, size),
                 "formula": netreduce_traversals(topo, job.leaf,
                                                 len(job.result_group.tree_links)),
                 "wall_s": time.perf_counter() - start})
    fab.close()
    return rows
