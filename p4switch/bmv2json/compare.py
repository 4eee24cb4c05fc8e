"""`python -m p4switch.bmv2json.compare PROG.p4 ...`: loads each program from its P4 source and
from the BMv2 JSON beside it, gives both the same random table entries, action profile members
and groups, multicast groups and clone sessions (through the Switch API, by the P4Info names of
the source), sends both the same frames, and reports whether every output packet, digest,
counter and register agrees.

`--written`: the JSON is instead the one `p4switch compile --bmv2-json` writes, read back and
run on the STF test beside the program (PROG.stf) when the source passes it."""
from __future__ import annotations

import random
import sys

import click


def _rand_value(rng, width):
    return rng.getrandbits(width) if width else 0


def configure(sw, prog, seed):
    """Deterministic random state for `sw` (the same for the same program and seed)."""
    rng = random.Random(seed)
    keyvals = []
    for _pid, group in enumerate((1, 2, 3)):
        sw.mc_group_create(group, [(rng.randrange(1, 8), rng.randrange(0, 4)) for _ in range(3)])
    for session in range(1, 9):
        sw.clone_session_set(session, rng.randrange(1, 8))
    profiles_done = {}
    for tname, spec in prog.tables.items():
        if spec.get("hidden") or "hidden" in spec.get("annotations", {}):
            continue
        actions = [a for a in spec["actions"] if a["scope"] != "DEFAULT_ONLY"]
        if not actions:
            continue
        impl = spec.get("implementation")
        if impl and impl not in profiles_done:
            members = []
            for mid in range(1, 5):
                a = rng.choice(actions)["name"]
                params = {p["name"]: _rand_value(rng, p["width"]) for p in prog.actions[a]["params"]}
                sw.act_prof_add_member(impl, mid, a, params)
                members.append(mid)
            sw.act_prof_add_group(impl, 1, members[:3])
            profiles_done[impl] = True
        for _ in range(4):
            match = {}
            for k in spec["keys"]:
                w, kind = k["width"], k["match"]
                v = _rand_value(rng, w)
                keyvals.append((v, w))
                if kind == "exact":
                    match[k["name"]] = v
                elif kind == "lpm":
                    match[k["name"]] = (v, rng.randrange(0, w + 1))
                elif kind == "ternary":
                    match[k["name"]] = (v, _rand_value(rng, w))
                elif kind == "range":
                    lo = _rand_value(rng, w)
                    match[k["name"]] = (lo, min((1 << w) - 1, lo + rng.randrange(0, 1 << min(w, 8))))
                else:
                    match[k["name"]] = v
            prio = rng.randrange(1, 100) if any(k["match"] in ("ternary", "range", "optional")
                                                for k in spec["keys"]) else None
            try:
                if impl:
                    if rng.random() < 0.5:
                        sw.table_add_member(tname, match, rng.randrange(1, 5), priority=prio)
                    else:
                        sw.table_add_group(tname, match, 1, priority=prio)
                else:
                    a = rng.choice(actions)["name"]
                    params = {p["name"]: _rand_value(rng, p["width"])
                              for p in prog.actions[a]["params"]}
                    sw.table_add(tname, match, a, params, priority=prio)
            except (KeyError, ValueError) as exc:
                if "duplicate" not in str(exc) and "already" not in str(exc):
                    raise
    return keyvals


def frames(keyvals, seed, count=300):
    """Random frames, and frames carrying each entry's key bytes at every offset up to 40."""
    rng = random.Random(seed + 1)
    out = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 80))) for _ in range(count)]
    for v, w in keyvals[:40]:
        raw = v.to_bytes((w + 7) // 8, "big")
        for off in range(0, 40, 2):
            base = bytearray(rng.getrandbits(8) for _ in range(64))
            base[off:off + len(raw)] = raw
            out.append(bytes(base))
    return out


def snapshot(sw, prog):
    state = {}
    for name, spec in prog.externs.items():
        kind = spec["kind"]
        try:
            if kind == "register":
                state[name] = [sw.register_read(name, i) for i in range(spec["size"])]
            elif kind == "counter":
                state[name] = [sw.counter_read(name, i) for i in range(spec["size"])]
        except KeyError:
            pass
    return state


def compare(p4_path, json_path, backend="python", seed=1) -> str | None:
    """None if both agree, else the first difference."""
    import p4switch
    from p4switch import bmv2json, frontend, p4info
    prog = frontend.compile_file(p4_path)
    info = p4info.build(prog)
    a = p4switch._switch(backend)(prog, info)
    b = bmv2json.load(json_path, backend=backend, p4info=info)
    keyvals = configure(a, prog, seed)
    configure(b, prog, seed)
    for i, frame in enumerate(frames(keyvals, seed)):
        port = 1 + i % 4
        out_a, out_b = a.process(port, frame), b.process(port, frame)
        if out_a != out_b:
            return f"frame {i} ({frame.hex()}) on port {port}: source gives {out_a}, JSON {out_b}"
        da, db = a.digests(), b.digests()
        if [d[1:] if isinstance(d, tuple) else d for d in da] != \
                [d[1:] if isinstance(d, tuple) else d for d in db]:
            return f"frame {i}: digests differ: {da} vs {db}"
    sa, sb = snapshot(a, prog), snapshot(b, prog)
    if sa != sb:
        return f"extern state differs: {sa} vs {sb}"
    return None


def written(p4_path, backend="python", dialect="p4switch") -> str:
    """'pass', 'source fails', 'refused: ...' or 'FAILS: ...' for a program written as JSON."""
    import json

    from p4switch import _switch, bmv2json, frontend, p4info, parse, stf
    from p4switch.bmv2json.write import CannotWrite, write
    stf_path = p4_path[:-3] + ".stf"
    source = parse.preprocess(p4_path)
    prog = frontend.compile_source(source, p4_path)
    info = p4info.build(prog)
    if not stf.run_stf(p4_path, stf_path, sw=_switch(backend)(prog, info), dialect=dialect).passed:
        return "source fails"
    try:
        doc = write(source)
    except CannotWrite as exc:
        return f"refused: {exc}"
    sw = _switch(backend)(bmv2json.load_bytes(json.dumps(doc).encode(), info), info)
    result = stf.run_stf(p4_path, stf_path, sw=sw, dialect=dialect)
    return "pass" if result.passed else "FAILS: " + result.report.splitlines()[0]


def written_main(programs, backend, dialect):
    counts: dict[str, int] = {}
    for p4 in programs:
        try:
            verdict = written(p4, backend, dialect)
        except Exception as exc:    # the source does not compile or its STF does not parse
            verdict = f"source fails ({type(exc).__name__})"
        kind = verdict.split(":")[0].split(" (")[0]
        counts[kind] = counts.get(kind, 0) + 1
        click.echo(f"{verdict[:160]}  {p4}")
    click.echo(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    sys.exit(1 if counts.get("FAILS") else 0)


@click.command()
@click.argument("pairs", nargs=-1, required=True)
@click.option("--backend", default="python", type=click.Choice(["python", "native"]))
@click.option("--written", "use_writer", is_flag=True,
              help="write each program with the writer and run its STF test from the JSON")
@click.option("--dialect", default="p4switch", type=click.Choice(["p4switch", "p4c"]),
              help="STF dialect with --written")
def main(pairs, backend, use_writer, dialect):
    """PAIRS: PROG.p4 files, each beside its PROG.json (or, with --written, its PROG.stf)."""
    if use_writer:
        written_main(pairs, backend, dialect)
    same = 0
    for p4 in pairs:
        json_path = p4[:-3] + ".json"
        try:
            diff = compare(p4, json_path, backend)
        except Exception as exc:    # a refusal or failure is a result of this run, reported
            diff = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        same += diff is None
        click.echo(f"{'identical' if diff is None else 'DIFFERENT'}  {p4}" + ("" if diff is None else f"\n    {diff}"))
    click.echo(f"{same} of {len(pairs)} identical")
    sys.exit(0 if same == len(pairs) else 1)


if __name__ == "__main__":
    main()
