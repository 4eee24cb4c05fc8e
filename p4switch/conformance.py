"""Run p4switch against p4c's own v1model STF corpus and print a pass table.

    python -m p4switch.conformance --p4c-src P4C_CHECKOUT [--p4c-bin DIR] [--only LIST] [NAME...]

The corpus is `testdata/p4_16_samples/*-bmv2.p4` with an `.stf` beside it, read from a p4c
checkout the user supplies (it is never part of this repository). Each program is compiled by
p4switch and its STF run through `p4switch stf`; with `--p4c-bin` (a directory holding
`p4c-bm2-ss`) the P4Info p4switch writes is compared with the one p4c writes
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


@dataclass
class Outcome:
    name: str
    stf: str          # "pass", "fail" or "error"
    stf_detail: str
    p4info: str       # "same", "differs", "error" or "-" (not compared)
    p4info_detail: str


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


def check_program(program: Path, p4c_bin: Path | str | None) -> Outcome:
    """Compile PROGRAM with p4switch, run its STF and (with p4c_bin) compare P4Info."""
    import p4switch

    from . import frontend, p4info
    from .stf import StfError, run_stf
    from .switch import Switch

    include = (program.parent,)
    try:
        prog = frontend.compile_file(str(program), include)
        info = p4info.build(prog)
    except p4switch.P4CompileError as exc:
        detail = _first_line(str(exc)).replace(str(program.parent) + "/", "")
        return Outcome(program.stem, "error", detail, "error" if p4c_bin else "-", "")
    try:
        # the corpus is written for p4c's BMv2 driver: its dialect, its view of the ports
        result = run_stf(program, program.with_suffix(".stf"), sw=Switch(prog, info), dialect="p4c")
        stf, detail = ("pass", "") if result.passed else ("fail", _first_line(result.report))
    except StfError as exc:
        stf, detail = "error", _first_line(str(exc)).replace(str(program.parent) + "/", "")
    except Exception as exc:  # the switch itself broke: report, go on with the corpus
        stf, detail = "error", f"{type(exc).__name__}: {exc}"
    p4i, p4i_detail = "-", ""
    if p4c_bin is not None:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                theirs = (stored_p4info(program) if p4c_bin == STORED
                          else p4c_p4info(Path(p4c_bin), program, Path(tmp)))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                p4i, p4i_detail = "error", str(exc)
            else:
                p4i_detail = p4info_diff(info, theirs)
                p4i = "differs" if p4i_detail else "same"
    return Outcome(program.stem, stf, detail, p4i, p4i_detail)


def _check_one(args):
    program, p4c_bin = args
    return check_program(program, p4c_bin)


def _worker_init():
    sys.setrecursionlimit(10000)


def run_corpus(programs: list[Path], p4c_bin: Path | None, jobs: int = 1, echo=print):
    """Checks each program in a child process (a hang or crash costs one program only)."""
    outcomes = []
    with multiprocessing.get_context("spawn").Pool(jobs, _worker_init, maxtasksperchild=20) as pool:
        pending = [(p, pool.apply_async(_check_one, ((p, p4c_bin),))) for p in programs]
        for i, (program, res) in enumerate(pending, start=1):
            try:
                outcome = res.get(_TIMEOUT_S)
            except multiprocessing.TimeoutError:
                outcome = Outcome(program.stem, "error", f"timed out after {_TIMEOUT_S} s",
                                  "-" if p4c_bin is None else "error", "")
            outcomes.append(outcome)
            echo(f"[{i}/{len(programs)}] {outcome.name}: stf {outcome.stf}"
                 + (f", p4info {outcome.p4info}" if p4c_bin else ""))
    return outcomes


def format_table(outcomes: list[Outcome], with_p4info: bool) -> str:
    width = max([len(o.name) for o in outcomes] + [7])
    head = f"{'program':<{width}}  {'stf':<5}  " + (f"{'p4info':<7}  " if with_p4info else "")
    lines = [head + "detail"]
    for o in outcomes:
        detail = "; ".join(d for d in (o.stf_detail, o.p4info_detail) if d)
        lines.append(f"{o.name:<{width}}  {o.stf:<5}  "
                     + (f"{o.p4info:<7}  " if with_p4info else "") + detail)
    n = len(outcomes)
    lines.append("")
    lines.append(f"stf: {sum(o.stf == 'pass' for o in outcomes)}/{n} pass")
    if with_p4info:
        lines.append(f"p4info: {sum(o.p4info == 'same' for o in outcomes)}/{n} identical to p4c's")
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
@click.option("-j", "--jobs", default=1, show_default=True, help="Programs checked at once.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@click.argument("names", nargs=-1)
def main(p4c_src, p4c_bin, stored_p4info, only_file, jobs, quiet, names):
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
    echo = (lambda _: None) if quiet else (lambda s: click.echo(s, err=True))
    reference = Path(p4c_bin) if p4c_bin else STORED if stored_p4info else None
    outcomes = run_corpus(programs, reference, jobs, echo)
    click.echo(format_table(outcomes, reference is not None))


if __name__ == "__main__":
    main()
