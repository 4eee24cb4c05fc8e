"""Who uses each link, read from fabricd's intent: vClos slices hold links; installed
Ethereal steps route sub-flows over paths; multicast groups and SwitchML jobs replicate over
a tree; NetReduce jobs aggregate up a tree of stages. A link may have several users."""
from __future__ import annotations

from collections import defaultdict

from controller import switch_plan
from controller.intent import Intent, IntentError


def link_users(intent: Intent) -> dict[int, list[str]]:
    """Link index -> the names of what uses it ("slice jobA", "step s1", ...), sorted."""
    users: dict[int, set[str]] = defaultdict(set)
    topo = intent.topo
    for sl in intent.slices.values():
        for i in sl.links:
            users[i].add(f"slice {sl.job}")
    for step in intent.steps.values():
        for sub in intent.step_plan(step).subflows:
            if sub.path is not None:
                for i in sub.path.links:
                    users[i].add(f"step {step.name}")
            for host in (sub.flow.src, sub.flow.dst):
                users[_host_link(topo, host)].add(f"step {step.name}")
    for group in intent.groups.values():
        for i in _tree_links(intent, group.members, group.slice_id, group.group_id):
            users[i].add(f"group {group.name}")
    for job in intent.jobs.values():
        for w in job.workers:
            users[_host_link(topo, w)].add(f"switchml {job.name}")
    for job in intent.nr_jobs.values():
        for st in job.stages:
            for child in st.children:
                for lk in topo.links_between(child, st.switch)[:1]:
                    users[lk.index].add(f"netreduce {job.name}")
    return {i: sorted(names) for i, names in users.items()}


def _host_link(topo, host: str) -> int:
    h = topo.host(host)
    return topo.ports(h.leaf)[h.leaf_port].index


def _tree_links(intent: Intent, members, slice_id: int, group_id: int) -> set[int]:
    try:
        tree = switch_plan.group_tree(intent, members, slice_id, group_id=group_id)
    except IntentError:
        return set()        # a group whose tree cannot be built now (a failed link) shows none
    return {intent.topo.ports(sw)[r.port].index for sw, reps in tree.items() for r in reps}
