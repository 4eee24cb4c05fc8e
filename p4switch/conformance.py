"""Run p4switch against p4c's own v1model STF corpus and print a pass table.

    python -m p4switch.conformance --p4c-src P4C_CHECKOUT [--backend native|python | --diff]
                                   [--p4c-bin DIR | --stored-p4info] [--only LIST] [NAME...]

The corpus is `testdata/p4_16_samples/*-bmv2.p4` with an `.stf` beside it, read from a p4c
checkout the user supplies (it is never part of this repository). Each program is compiled by
p4switch and its STF run as `p4switch stf --dialect p4c` runs it: on the native backend, or on
the Python backend with the reason when the native one does not run the program (`--backend
python`: the Python backend only). `--diff` runs every program on both backends and reports
where they diverge: output packets (per port, in order), counters, direct counters, registers,
the STF verdict, or a program the native backend does not run. With `--p4c-bin` (a directory
holding `p4c-bm2-ss`) the P4Info p4switch writes is compared with the one p4c writes
(`--p4runtime-files`), ids and `initial_default_action` set aside; `--stored-p4info`
compares with the P4Info files p4c's test suite keeps in the checkout instead. `--only FILE` restricts the
run to the program names listed in FILE, one a line (e.g. the programs real BMv2 passes).
"""
from __future__ import annotations

import multiprocessing
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

SAMPLES = Path("testdata") / "p4_16_samples"
STORED = "stored"  # compare P4Info with the outputs stored in the p4c checkout
_TIMEOUT_S = 120


BACKENDS = ("native", "python", "diff")


@dataclass
class Outcome:
    name: str
    stf: str          # "pass", "fail" or "error"
    stf_detail: str
    p4info: str       # "same", "differs", "error" or "-" (not compared)
    p4info_detail: str
    backend: str = "python"   # what ran the STF: "native", "python", "python*" (native refused)
    divergence: str = "-"     # --diff: "same", or how the backends differ; "-" not compared


@dataclass
class _Run:
    stf: str
    detail: str
    outputs: dict
    state: dict


def corpus(p4c_src: Path, only: set[str] | None = None) -> list[Path]:
    """The corpus programs: *-bmv2.p4 with an .stf, sorted, optionally restricted by name."""
    samples = p4c_src / SAMPLES
    if not samples.is_dir():
        raise click.UsageError(f"{samples} does not exist: --p4c-src must be a p4c checkout")
    progs = sorted(p for p in samples.glob("*-bmv2.p4") if p.with_suffix(".stf").exists())
    if only is not None:
        unknown = only - {p.stem for p in progs}
        if unknown:
            raise click.UsageError(f"not in the corpus: {', '.join(sorted(unknown))}")
        progs = [p for p in progs if p.stem in only]
    return progs


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[0][:160] if lines else ""


def normalize_p4info(info):
    """A copy without what p4c and p4switch may number or fill differently: ids (and the
    references made of them, replaced by names) and tables' initial_default_action."""
    from p4.config.v1 import p4info_pb2

    info = p4info_pb2.P4Info.FromString(info.SerializeToString())
    names = {}
    for kind in ("tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
                 "direct_meters", "controller_packet_metadata", "value_sets", "registers",
                 "digests", "externs"):
        for obj in getattr(info, kind):
            if hasattr(obj, "preamble"):
                names[obj.preamble.id] = obj.preamble.name
    for kind in ("tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
                 "direct_meters", "controller_packet_metadata", "value_sets", "registers",
                 "digests"):
        for obj in getattr(info, kind):
            obj.preamble.id = 0
    for table in info.tables:
        table.ClearField("initial_default_action")
        for ref in table.action_refs:
            ref.annotations.append(f"__name={names.get(ref.id, ref.id)}")
            ref.id = 0
        table.implementation_id = 0 if not table.implementation_id else 1
        refs = sorted(names.get(i, str(i)) for i in table.direct_resource_ids)
        table.ClearField("direct_resource_ids")
        table.preamble.annotations.extend(f"__direct={n}" for n in refs)
    for profile in info.action_profiles:
        tables = sorted(names.get(i, str(i)) for i in profile.table_ids)
        profile.ClearField("table_ids")
        profile.preamble.annotations.extend(f"__table={n}" for n in tables)
    for direct in list(info.direct_counters) + list(info.direct_meters):
        direct.preamble.annotations.append(f"__table={names.get(direct.direct_table_id)}")
        direct.direct_table_id = 0
    info.ClearField("pkg_info")
    return info


def p4info_diff(ours, theirs) -> str:
    """'' when equal (after normalize_p4info), else the first differing line of the text."""
    from google.protobuf import text_format

    a = text_format.MessageToString(normalize_p4info(ours)).splitlines()
    b = text_format.MessageToString(normalize_p4info(theirs)).splitlines()
    if a == b:
        return ""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"line {i + 1}: p4switch '{x.strip()}' vs p4c '{y.strip()}'"
    longer, who = (a, "p4switch") if len(a) > len(b) else (b, "p4c")
    return f"only {who} has '{longer[min(len(a), len(b))].strip()}'"


def p4c_p4info(p4c_bin: Path, program: Path, workdir: Path):
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2

    out = workdir / (program.stem + ".p4info.txtpb")
    cmd = [str(p4c_bin / "p4c-bm2-ss"), "--p4runtime-files", str(out), "-o",
           str(workdir / (program.stem + ".json")), str(program)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT_S)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError("p4c: " + _first_line(proc.stderr or proc.stdout))
    return text_format.Parse(out.read_text(), p4info_pb2.P4Info())


def stored_p4info(program: Path):
    """The P4Info p4c's own test suite stored for PROGRAM (testdata/p4_16_samples_outputs)."""
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2

    ref = program.parent.parent / "p4_16_samples_outputs" / (program.name + ".p4info.txtpb")
    if not ref.exists():
        raise RuntimeError(f"no stored P4Info {ref.name}")
    info = text_format.Parse(ref.read_text(), p4info_pb2.P4Info())
    info.type_info.SetInParent()  # stored files older than p4c's always-written type_info lack it
    return info


def switch_state(sw) -> dict:
    """Every counter, register and direct counter of a switch (either backend)."""
    from .stateful import Counter, Register
    out = {}
    for name, obj in sw.externs.items():
        if isinstance(obj, Register):
            out[name] = list(obj.values)
        elif isinstance(obj, Counter):
            out[name] = (list(obj.packets), list(obj.bytes))
    for name, t in sw.tables.items():
        if t.counting:
            out[name] = [sw.direct_counter_read(name, h) for h in sorted(t.entries)]
    return out


def _run_stf(program: Path, sw) -> _Run:
    from .stf import StfError, run_stf
    try:
        # the corpus is written for p4c's BMv2 driver: its dialect, its view of the ports
        result = run_stf(program, program.with_suffix(".stf"), sw=sw, dialect="p4c")
        stf, detail = ("pass", "") if result.passed else ("fail", _first_line(result.report))
        outputs = result.outputs
    except StfError as exc:
        stf, detail = "error", _first_line(str(exc)).replace(str(program.parent) + "/", "")
        outputs = {}
    except Exception as exc:  # the switch itself broke: report, go on with the corpus
        stf, detail, outputs = "error", f"{type(exc).__name__}: {exc}", {}
    return _Run(stf, detail, outputs, switch_state(sw))


def _switch(prog, info, backend):
    """A fresh switch on BACKEND (the program copied: each switch owns its tables)."""
    from .ir import Program
    from .native.switch import NativeSwitch
    from .switch import Switch
    copy = Program.from_json(prog.to_json())
    return (NativeSwitch if backend == "native" else Switch)(copy, info)


def divergence(python: _Run, native: _Run) -> str:
    """'' when both backends gave the same verdict, packets and state, else the first difference."""
    if python.stf != native.stf:
        return f"stf {python.stf} on python, {native.stf} on native"
    for port in sorted(set(python.outputs) | set(native.outputs)):
        a, b = python.outputs.get(port, []), native.outputs.get(port, [])
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                at = next((j for j, (u, v) in enumerate(zip(x, y, strict=False)) if u != v),
                          min(len(x), len(y)))
                return (f"port {port} packet {i}: byte {at} differs (python {x.hex()[2 * at:2 * at + 8]}"
                        f"..., native {y.hex()[2 * at:2 * at + 8]}...)")
        if len(a) != len(b):
            return f"port {port}: {len(a)} packets on python, {len(b)} on native"
    for name in sorted(set(python.state) | set(native.state)):
        if python.state.get(name) != native.state.get(name):
            return f"{name}: python {str(python.state.get(name))[:60]} vs native {str(native.state.get(name))[:60]}"
    return ""


def check_program(program: Path, p4c_bin: Path | str | None, backend: str = "native") -> Outcome:
    """Compile PROGRAM with p4switch, run its STF on BACKEND ("native" falls back to the Python
    backend as `p4switch stf` does; "diff" runs both and compares) and, with p4c_bin, compare
    P4Info."""
    import p4switch

    from . import frontend, p4info
    from .native import Unsupported

    include = (program.parent,)
    try:
        prog = frontend.compile_file(str(program), include)
        info = p4info.build(prog)
    except p4switch.P4CompileError as exc:
        detail = _first_line(str(exc)).replace(str(program.parent) + "/", "")
        return Outcome(program.stem, "error", detail, "error" if p4c_bin else "-", "", "-")
    runs, ran, refused = {}, "python", ""
    for b in (("python", "native") if backend == "diff" else (backend,)):
        try:
            runs[b] = _run_stf(program, _switch(prog, info, b))
            ran = b
        except Unsupported as exc:
            refused = str(exc)
    if "python" not in runs and "native" not in runs:      # native refused: p4switch stf's fallback
        runs["python"] = _run_stf(program, _switch(prog, info, "python"))
    main = runs.get("native") or runs["python"]
    outcome = Outcome(program.stem, main.stf, main.detail, "-", "", ran)
    if refused:
        outcome.backend = "python*"
        outcome.stf_detail = "; ".join(d for d in (f"native backend: {refused}", main.detail) if d)
    if backend == "diff":
        outcome.divergence = (f"native refused: {refused}" if refused
                              else divergence(runs["python"], runs["native"]) or "same")
    if p4c_bin is not None:
        outcome.p4info, outcome.p4info_detail = _compare_p4info(program, p4c_bin, info)
    return outcome


def _compare_p4info(program: Path, p4c_bin, info) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            theirs = (stored_p4info(program) if p4c_bin == STORED
                      else p4c_p4info(Path(p4c_bin), program, Path(tmp)))
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            return "error", str(exc)
    detail = p4info_diff(info, theirs)
    return ("differs" if detail else "same"), detail


def _check_one(args):
    program, p4c_bin, backend = args
    return check_program(program, p4c_bin, backend)


def _worker_init():
    sys.setrecursionlimit(10000)


def run_corpus(programs: list[Path], p4c_bin: Path | None, jobs: int = 1, echo=print,
               backend: str = "native"):
    """Checks each program in a child process (a hang or crash costs one program only)."""
    outcomes = []
    with multiprocessing.get_context("spawn").Pool(jobs, _worker_init, maxtasksperchild=20) as pool:
        pending = [(p, pool.apply_async(_check_one, ((p, p4c_bin, backend),))) for p in programs]
        for i, (program, res) in enumerate(pending, start=1):
            try:
                outcome = res.get(_TIMEOUT_S)
            except multiprocessing.TimeoutError:
                outcome = Outcome(program.stem, "error", f"timed out after {_TIMEOUT_S} s",
                                  "-" if p4c_bin is None else "error", "", "-",
                                  "error" if backend == "diff" else "-")
            outcomes.append(outcome)
            echo(f"[{i}/{len(programs)}] {outcome.name}: stf {outcome.stf} ({outcome.backend})"
                 + (f", p4info {outcome.p4info}" if p4c_bin else "")
                 + (f", backends {outcome.divergence}" if backend == "diff" else ""))
    return outcomes


def format_table(outcomes: list[Outcome], with_p4info: bool, with_diff: bool = False) -> str:
    width = max([len(o.name) for o in outcomes] + [7])
    head = (f"{'program':<{width}}  {'stf':<5}  {'backend':<7}  "
            + (f"{'p4info':<7}  " if with_p4info else "") + ("backends  " if with_diff else ""))
    lines = [head + "detail"]
    for o in outcomes:
        diverges = o.divergence not in ("same", "-")
        detail = "; ".join(d for d in (o.divergence if diverges else "", o.stf_detail,
                                       o.p4info_detail) if d)
        lines.append(f"{o.name:<{width}}  {o.stf:<5}  {o.backend:<7}  "
                     + (f"{o.p4info:<7}  " if with_p4info else "")
                     + (f"{'DIFFER' if diverges else o.divergence:<8}  " if with_diff else "")
                     + detail)
    n = len(outcomes)
    lines.append("")
    fell_back = sum(o.backend == "python*" for o in outcomes)
    lines.append(f"stf: {sum(o.stf == 'pass' for o in outcomes)}/{n} pass"
                 + (f" ({fell_back} on the Python backend: the native one does not run them)"
                    if fell_back else ""))
    if with_p4info:
        lines.append(f"p4info: {sum(o.p4info == 'same' for o in outcomes)}/{n} identical to p4c's")
    if with_diff:
        same = sum(o.divergence == "same" for o in outcomes)
        unrun = sum(o.divergence == "-" for o in outcomes)
        lines.append(f"backends: {same}/{n} the same on python and native, "
                     f"{sum(o.divergence not in ('same', '-') for o in outcomes)} diverge"
                     + (f", {unrun} not compared (they do not compile)" if unrun else ""))
    return "\n".join(lines)


@click.command()
@click.option("--p4c-src", required=True, type=click.Path(exists=True, file_okay=False),
              help="A p4c checkout (its testdata/p4_16_samples is the corpus).")
@click.option("--p4c-bin", type=click.Path(exists=True, file_okay=False),
              help="Directory holding p4c-bm2-ss: compare P4Info with p4c's.")
@click.option("--stored-p4info", is_flag=True,
              help="Compare P4Info with the p4c outputs stored in the checkout "
                   "(testdata/p4_16_samples_outputs) instead of running p4c.")
@click.option("--only", "only_file", type=click.Path(exists=True, dir_okay=False),
              help="File listing the program names to run, one a line.")
@click.option("--backend", type=click.Choice(["native", "python"]), default="native",
              show_default=True, help="native: as `p4switch stf` runs by default (the Python "
              "backend where the native one does not run the program); python: the reference.")
@click.option("--diff", is_flag=True, help="Run every program on both backends and report "
              "divergences (packets, counters, registers, verdicts, refusals).")
@click.option("-j", "--jobs", default=1, show_default=True, help="Programs checked at once.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@click.argument("names", nargs=-1)
def main(p4c_src, p4c_bin, stored_p4info, only_file, backend, diff, jobs, quiet, names):
    """Run p4c's v1model STF corpus through p4switch; print the pass table."""
    only = None
    if only_file:
        only = {ln.strip() for ln in Path(only_file).read_text().splitlines()
                if ln.strip() and not ln.startswith("#")}
    if names:
        stems = {Path(n).stem for n in names}
        only = stems if only is None else only & stems
    programs = corpus(Path(p4c_src), only)
    if p4c_bin and not (Path(p4c_bin) / "p4c-bm2-ss").exists():
        raise click.UsageError(f"no p4c-bm2-ss in {p4c_bin}")
    from .native import available, unavailable_reason
    if not available():
        if diff:
            raise click.UsageError(f"--diff needs the native backend: {unavailable_reason()}")
        if backend == "native":
            click.echo(unavailable_reason(), err=True)
            backend = "python"
    echo = (lambda _: None) if quiet else (lambda s: click.echo(s, err=True))
    reference = Path(p4c_bin) if p4c_bin else STORED if stored_p4info else None
    outcomes = run_corpus(programs, reference, jobs, echo, "diff" if diff else backend)
    click.echo(format_table(outcomes, reference is not None, diff))
    if diff and any(o.divergence not in ("same", "-") for o in outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
