"""The whole C program of one P4 program: runtime.h, the generated types and stages (parser,
pipelines, deparser), the traffic manager's program-specific parts (packet state, field-list
preservation, digests, table and extern layout), then simple_switch.c."""
from __future__ import annotations

from pathlib import Path

from ..engine import Rng
from . import deparser, headers, parser, pipeline
from .codegen import CodeGen, arg_words
from .lowered import Lowered, Retry, Struct, Unsupported

HERE = Path(__file__).parent
HASH_IDS = {"crc32": 0, "crc32_custom": 0, "crc16": 1, "crc16_custom": 1, "csum16": 2, "xor16": 3,
            "identity": 4, "random": 5}


def check(program) -> None:
    """Refuses what the native backend does not run, naming the construct."""
    for name, spec in program.externs.items():
        kind = spec["kind"]
        if kind == "value_set" and (spec["size"] > 256 or sum(spec["widths"]) > 64):
            raise Unsupported(f"parser value_set {name} over 64 bits or with more than 256 members")
        if kind == "register" and spec["width"] > 64:
            raise Unsupported(f"register {name} of {spec['width']} bits (wider than 64)")
        if kind == "action_selector" and spec.get("algorithm", "crc16") not in HASH_IDS:
            raise Unsupported(f"selector algorithm {spec['algorithm']} of {name}")
    for name, spec in program.tables.items():
        for k in spec["keys"]:
            if k["width"] > 128:
                raise Unsupported(f"key {k['name']} of {k['width']} bits (wider than 128) in table {name}")
        for k in spec.get("selector_keys", []):
            if k["width"] > 64:
                raise Unsupported(f"selector key {k['name']} of {k['width']} bits (wider than 64) in table {name}")
        if len(spec["keys"]) > 16:
            raise Unsupported(f"table {name} with more than 16 keys")
    for name, a in program.actions.items():
        if len(a["params"]) > 16:
            raise Unsupported(f"action {name} with more than 16 parameters")
        if sum(arg_words(p["width"]) for p in a["params"]) > 16:
            raise Unsupported(f"action {name} with more than 16 words of parameters")
        for p in a["params"]:
            if p["width"] > 512:
                raise Unsupported(f"parameter {p['name']} of {p['width']} bits (wider than 512) in action {name}")
    for name, d in program.digests.items():
        if len(d.get("attrs", [])) > 16:
            raise Unsupported(f"digest {name} with more than 16 fields")


def table_nargs(program, name) -> int:
    spec = program.tables[name]
    return max([sum(arg_words(p["width"]) for p in program.actions[a["name"]]["params"])
                for a in spec["actions"]] + [0])


def generate(program) -> str:
    """The program's C source; raises Unsupported (with the reason) for what it does not
    compile, also for a construct the generator fails on (so callers fall back, saying so)."""
    try:
        return _generate(program)
    except Unsupported:
        raise
    except Exception as exc:     # a generator bug must not crash the default path
        raise Unsupported(f"internal error of the native code generator ({type(exc).__name__}: "
                          f"{exc})") from exc


def _generate(program) -> str:
    check(program)
    low = Lowered(program.source)
    for _ in range(64):
        gen = CodeGen(low, program)
        try:
            parser.generate(gen)
            pipeline.generate(gen)
            deparser.generate(gen)
            gen.translate_function("PRESERVE", (("state",), ("state",), ("int",)), cfn="PRESERVE")
            break
        except Retry:
            continue
    else:
        raise Unsupported("wide values flow through too many variables")
    tuples = {}
    for kind, tname in gen.tuples.items():
        st = Struct(tname, "T")
        for i, k in enumerate(kind[1]):
            st.members[f"f{i}"] = k
        tuples[kind] = st
    order = headers.type_order(low, tuples)
    out = [f"#define P4_RNG_SEED {Rng.SEED:#x}ULL", (HERE / "runtime.h").read_text(),
           "/* ---- generated types */"]
    for st in order:
        out.append(headers.declare(st, gen.ctype))
    frames = sorted(set(gen.digest_frames))
    out.append("typedef union { char none; " + " ".join(f"{f} f{i};" for i, f in enumerate(frames)) + " } dframe_t;")
    role = low.roles
    out.append(f"""typedef struct state {{
    {role['HDR']} hdr; {role['META']} meta; {role['SM']} sm;
    buf_t *data; uint32_t plen, payload_off;
    int64_t clone_kind, clone_session, clone_fl, resubmit, recirculate, truncate, digest;
    int depth; uint32_t clip;
    dframe_t digest_frame;
}} state_t;
static state_t *CUR;
static void digest_push(uint64_t id, const uint64_t *vals, uint32_t n);""")
    for st in order:
        if st.kind in "HSUK":
            out.append(headers.functions(st, low))
    out.append("/* ---- generated stages */")
    out += gen.protos
    out += gen.bodies
    out.append(_digest_run(gen, program))
    out.append(_init(program))
    out.append((HERE / "simple_switch.c").read_text())
    out.append((HERE / "afxdp.c").read_text())
    out.append((HERE / "device.c").read_text())
    return "\n".join(out)


def _digest_run(gen: CodeGen, program) -> str:
    names = list(program.digests)
    lines = ["static void DIGEST_RUN(state_t *S) {", "    uint64_t v[MAXARGS];", "    switch (S->digest) {"]
    for idx, (name, cfn, frame, n) in enumerate(gen.digest_fns):
        lines.append(f"    case {idx}: {cfn}((const {frame} *)&S->digest_frame, v); "
                     f"digest_push({names.index(name)}, v, {n}); break;")
    lines += ["    }", "}"]
    return "\n".join(lines)


def _init(program) -> str:
    lines = ["static void program_init(void) {"]
    tables = list(program.tables)
    profiles = [n for n, s in program.externs.items() if s["kind"] in ("action_profile", "action_selector")]
    regs = [n for n, s in program.externs.items() if s["kind"] == "register"]
    cnts = [n for n, s in program.externs.items() if s["kind"] == "counter"]
    meters = [n for n, s in program.externs.items() if s["kind"] == "meter"]
    dmeters = [n for n, s in program.externs.items() if s["kind"] == "direct_meter"]
    lines.append(f"    METERS = calloc({len(meters) + 1}, sizeof(meter_t));")
    lines.append(f"    DMCOLOR = calloc({len(dmeters) + 1}, sizeof(i128));")
    for i, name in enumerate(meters):
        spec = program.externs[name]
        lines.append(f"    METERS[{i}].size = {spec['size']}; METERS[{i}].bytes = {int(spec['unit'] != 'packets')}; "
                     f"METERS[{i}].s = calloc({spec['size'] + 1}, sizeof(mstate_t));")
    lines.append(f"    TABLES = calloc({len(tables) + 1}, sizeof(table_t));")
    for i, name in enumerate(tables):
        spec = program.tables[name]
        exact = all(k["match"] == "exact" for k in spec["keys"]) and bool(spec["keys"])
        prof = profiles.index(spec["implementation"]) if spec.get("implementation") else -1
        lines.append(f"    TABLES[{i}].nkeys = {len(spec['keys'])}; TABLES[{i}].nargs = {table_nargs(program, name)}; "
                     f"TABLES[{i}].exact_only = {int(exact)}; TABLES[{i}].counting = {int(bool(spec.get('direct_counter')))}; "
                     f"TABLES[{i}].profile = {prof}; TABLES[{i}].idle = {int(bool(spec.get('support_timeout')))};")
        dm = spec.get("direct_meter")
        lines.append(f"    TABLES[{i}].dmeter = {dmeters.index(dm) if dm else -1}; "
                     f"TABLES[{i}].dmeter_bytes = {int(bool(dm) and program.externs[dm]['unit'] != 'packets')};")
    lines.append(f"    PROFILES = calloc({len(profiles) + 1}, sizeof(profile_t));")
    for i, name in enumerate(profiles):
        spec = program.externs[name]
        users = [t for t, s in program.tables.items() if s.get("implementation") == name]
        nargs = max([table_nargs(program, t) for t in users] + [0])
        mask = (1 << spec.get("output_width", 32)) - 1
        algo = HASH_IDS[spec.get("algorithm", "crc16")]
        lines.append(f"    PROFILES[{i}].nargs = {nargs}; PROFILES[{i}].algo = {algo}; "
                     f"PROFILES[{i}].out_mask = {min(mask, (1 << 64) - 1)}ULL;")
    nvs = sum(1 for s in program.externs.values() if s["kind"] == "value_set")
    lines.append(f"    VSETS = calloc({nvs + 1}, sizeof(vset_t));")
    lines.append(f"    REGS = calloc({len(regs) + 1}, sizeof(reg_t));")
    for i, name in enumerate(regs):
        spec = program.externs[name]
        mask = (1 << spec["width"]) - 1
        lines.append(f"    REGS[{i}].size = {spec['size']}; REGS[{i}].mask = {mask}ULL; "
                     f"REGS[{i}].v = calloc({spec['size'] + 1}, 8);")
    lines.append(f"    CNTS = calloc({len(cnts) + 1}, sizeof(cnt_t));")
    for i, name in enumerate(cnts):
        size = program.externs[name]["size"]
        lines.append(f"    CNTS[{i}].size = {size}; CNTS[{i}].packets = calloc({size + 1}, 8); "
                     f"CNTS[{i}].bytes = calloc({size + 1}, 8);")
    lines.append("}")
    return "\n".join(lines)
