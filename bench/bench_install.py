"""fabricd's control-plane cost on growing fabrics: computing every switch's fabric.p4 state
from the intent, planning the reconciliation of empty switches (a full install) and of switches
already in sync (a fabricd restart: zero updates), and how many P4Runtime updates one failed
link costs compared with a full install (ratio = install updates / link-down updates)."""
import time
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from controller import encode_fabric
from controller.intent import Intent
from controller.p4rt import Schema, State, sync

P4INFO = Path(__file__).resolve().parents[1] / "tests/controller/test_encode_fabric_p4info.txtpb"
FABRICS = [("leaf-spine 4x4x4", "kind: leaf-spine\nleaves: 4\nspines: 4\nhosts_per_leaf: 4\n"),
           ("leaf-spine 8x8x8", "kind: leaf-spine\nleaves: 8\nspines: 8\nhosts_per_leaf: 8\n"),
           ("leaf-spine 16x16x16",
            "kind: leaf-spine\nleaves: 16\nspines: 16\nhosts_per_leaf: 16\n"),
           ("fat-tree k=8", "kind: fat-tree\nk: 8\n")]


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def plan_all(schema, intended, current):
    return [sync.plan(schema, intended[n], current.get(n, State())) for n in intended]


def main() -> None:
    schema = Schema(text_format.Parse(P4INFO.read_text(), p4info_pb2.P4Info()))
    print(f"{'fabric':<20} {'switches':>8} {'entries':>8} {'state s':>8} {'plan s':>7} "
          f"{'in-sync plan s':>14} {'install updates':>15} {'link-down updates':>17} "
          f"{'ratio':>6}")
    for name, text in FABRICS:
        intent = Intent.from_yaml(text, 1024, name.split()[0], max_workers=32)
        states, t_state = timed(encode_fabric.intended_states, intent, schema)
        entries = sum(len(s.table_entries) for s in states.values())
        full, t_full = timed(plan_all, schema, states, {})
        same, t_same = timed(plan_all, schema, states, states)
        assert not any(same)
        failed = intent.clone()
        failed.set_link(failed.topo.links[-1].name, False)
        after = encode_fabric.intended_states(failed, schema)
        installs = sum(map(len, full))
        updates = sum(map(len, plan_all(schema, after, states)))
        print(f"{name:<20} {len(states):>8} {entries:>8} {t_state:>8.3f} {t_full:>7.3f} "
              f"{t_same:>14.3f} {installs:>15} {updates:>17} {installs / updates:>6.1f}")


if __name__ == "__main__":
    main()
