"""Differential tests of the native backend against the Python backend (the reference): every
STF test of the project, the fuzz corpus of test_core_fuzz.py and fabric.p4 configured as the
demo configures it under its own fuzzed frames (fabric_fuzz.py) give the same output packets
(byte for byte, in order), counters, direct counters and registers on both. A program the
native backend refuses fails here."""
from __future__ import annotations

from pathlib import Path

import fabric_fuzz
import pytest
from fabric_fuzz import state_of
from fuzz_corpus import PROGRAMS as FUZZ
from fuzz_corpus import fuzz_packets

import p4switch
from p4switch.native import available
from p4switch.stf import run_stf

HERE = Path(__file__).parent
P4SRC = HERE.parents[1] / "p4src"
STF_FILES = sorted((HERE / "stf").glob("*.stf")) + sorted((P4SRC / "tests").glob("*.stf"))
INCLUDE = (str(P4SRC / "include"),)

pytestmark = pytest.mark.skipif(not available(), reason="no C compiler (cc) for the native backend")


def _program(stf: Path) -> Path:
    return P4SRC / "fabric.p4" if stf.parent.parent == P4SRC else stf.with_suffix(".p4")


@pytest.mark.parametrize("stf", STF_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in STF_FILES])
def test_stf_same_on_both_backends(stf):
    results, states = {}, {}
    for backend in ("python", "native"):
        sw = p4switch.load(str(_program(stf)), include_dirs=INCLUDE, backend=backend)
        results[backend] = run_stf(None, stf, sw=sw)
        states[backend] = state_of(sw)
    assert results["native"].passed, results["native"].report
    assert results["native"].outputs == results["python"].outputs
    assert states["native"] == states["python"]


@pytest.mark.parametrize("program", FUZZ, ids=[f"{p.parent.name}/{p.stem}" for p in FUZZ])
def test_fuzz_corpus_same_on_both_backends(program):
    switches = {b: p4switch.load(str(program), include_dirs=INCLUDE, backend=b) for b in ("python", "native")}
    for sw in switches.values():
        if program.stem == "l3_three_tables":
            sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0, 0)}, "forward", {"dmac": 1, "port": 2})
    forwarded = 0
    for port, data in fuzz_packets(1234, 3000):
        want = switches["python"].process(port, data)
        assert switches["native"].process(port, data) == want, (port, data.hex())
        forwarded += len(want)
    assert state_of(switches["native"]) == state_of(switches["python"])
    assert forwarded > 0


# memory a few thousand frames may add to the process (allocator slack, caches warming up);
# a leak of a frame's size per frame (1 KiB x 1,500) would still be caught
RSS_SLACK_KIB = 8 * 1024


@pytest.mark.parametrize("mode,switch", fabric_fuzz.SWITCHES, ids=lambda v: v)
def test_fuzz_configured_fabric_same_on_both_backends(fabric_compiled, mode, switch):
    report = fabric_fuzz.fuzz(fabric_compiled, mode, switch, 1500, seed=11)
    assert report.crashes == {"python": 0, "native": 0}
    assert report.divergences == 0, report.first_divergence
    assert report.state_equal
    assert report.outputs > 0
    assert max(report.rss_growth_kib.values()) < RSS_SLACK_KIB, report.rss_growth_kib


def test_digests_same_on_both_backends(tmp_path):
    """digest() of a list and of a struct-valued field (read at the end of ingress, after a
    later write to it) give the same records on both backends."""
    text = (HERE / "stf" / "digest.p4").read_text()
    text = text.replace("struct meta_t {\n}\n", "")
    learn = "struct learn_t {\n    bit<8>  a;\n    bit<32> d;\n}\n"
    text = text.replace(learn, learn + "\nstruct meta_t {\n    learn_t rec;\n}\n")
    text = text.replace("digest<learn_t>(1, { hdr.h.a, hdr.h.d });",
                        "digest<learn_t>(1, { hdr.h.a, hdr.h.d });\n"
                        "        } else {\n"
                        "            meta.rec.a = hdr.h.a;\n"
                        "            digest<learn_t>(1, meta.rec);\n"
                        "            meta.rec.d = hdr.h.d;")
    program = tmp_path / "digest_struct.p4"
    program.write_text(text)
    records = {}
    for backend in ("python", "native"):
        sw = p4switch.load(str(program), backend=backend)
        for b in (1, 0):
            sw.process(0, bytes([7, b, 0, 0, 10, 0, 0, b + 1]))
        records[backend] = sw.digests()
    assert records["python"] == [("learn_t", {"a": 7, "d": 0x0A000002}),
                                 ("learn_t", {"a": 7, "d": 0x0A000001})]
    assert records["native"] == records["python"]


def test_tables_named_apart_only_by_punctuation(tmp_path):
    """@name("t|1") and @name("t^1") are two tables (their Python names once collided, and
    applying the first ran the second), on both backends."""
    program = tmp_path / "punctuation.p4"
    program.write_text("""#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers_t { h_t h; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout headers_t hdr, inout meta_t m) { apply { } }
control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action first() { hdr.h.a = 1; }
    action second() { hdr.h.b = 2; }
    @name("t|1") table t1 { actions = { first; } default_action = first(); }
    @name("t^1") table t2 { actions = { second; } default_action = second(); }
    apply { sm.egress_spec = 1; t1.apply(); t2.apply(); }
}
control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
""")
    for backend in ("python", "native"):
        sw = p4switch.load(str(program), backend=backend)
        assert sw.process(0, bytes([0, 0])) == [(1, bytes([1, 2]))], backend
        assert {"I.t|1", "I.t^1"} <= set(sw.tables), backend
