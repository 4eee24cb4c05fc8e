"""The machine facts the project relies on, checked from inside the venv."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.mark.netns
def test_netns_pair_pings(netns_pair):
    out = subprocess.run(["ip", "netns", "exec", netns_pair["a"], "ping", "-c", "2", "-W", "2",
                          netns_pair["ip_b"]], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0% packet loss" in out.stdout


@pytest.mark.netns
def test_namespaces_removed_after_failing_test(tmp_path):
    """Run a failing test in a child pytest and check its namespaces are gone afterwards."""
    test = tmp_path / "test_fails.py"
    test.write_text(textwrap.dedent("""
        import pathlib
        def test_fail(netns_pair):
            pathlib.Path(__file__).with_name("ns.txt").write_text(
                netns_pair["a"] + " " + netns_pair["b"])
            assert False, "deliberate"
    """))
    # The suite's own fixtures, by path: `import conftest` may find a subfolder's conftest.
    (tmp_path / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text())
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(test)], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1, run.stdout
    made = (tmp_path / "ns.txt").read_text().split()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for ns in made:
        assert ns not in listed


@pytest.mark.ebpf
def test_bcc_loads_a_program_from_the_venv():
    from bcc import BPF
    prog = BPF(text=b"int ok(struct __sk_buff *skb) { return 0; }")
    fn = prog.load_func(b"ok", BPF.SCHED_CLS)
    assert fn.fd > 0
    prog.cleanup()


@pytest.mark.mininet
def test_mininet_imports_from_the_venv():
    from mininet.net import Mininet
    from mininet.topo import Topo
    topo = Topo()
    topo.addHost("h1")
    assert Mininet is not None and "h1" in topo.hosts()
