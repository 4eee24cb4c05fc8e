"""A BMv2 JSON carries no P4Info ids: the client's P4Info assigns them (simple_switch_grpc takes
any). The P4Info p4switch builds for the translated program is given the client's ids, object
by object of the same kind and name, so the P4Info check compares names, keys and sizes."""
from __future__ import annotations

_KINDS = ("tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
          "direct_meters", "controller_packet_metadata", "value_sets", "registers", "digests")


def adopt(own, client) -> None:
    """Rewrites the ids of `own` (and its references) to those `client` gives the same names."""
    remap = {}
    for kind in _KINDS:
        theirs = {o.preamble.name: o.preamble.id for o in getattr(client, kind)}
        for o in getattr(own, kind):
            new = theirs.get(o.preamble.name)
            if new is not None and new != o.preamble.id:
                remap[o.preamble.id] = new
                o.preamble.id = new
    if not remap:
        return
    for t in own.tables:
        for ref in t.action_refs:
            ref.id = remap.get(ref.id, ref.id)
        t.implementation_id = remap.get(t.implementation_id, t.implementation_id)
        t.direct_resource_ids[:] = [remap.get(i, i) for i in t.direct_resource_ids]
    for ap in own.action_profiles:
        ap.table_ids[:] = [remap.get(i, i) for i in ap.table_ids]
    for kind in ("direct_counters", "direct_meters"):
        for d in getattr(own, kind):
            d.direct_table_id = remap.get(d.direct_table_id, d.direct_table_id)
