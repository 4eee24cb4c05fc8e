"""`python -m ebpf` on a namespace's interface: attach, configure, show, detach, bad input."""
import pytest
from click.testing import CliRunner

from ebpf import Impair, Pin, tc
from ebpf.cli import main

pytestmark = [pytest.mark.ebpf, pytest.mark.netns]


@pytest.fixture
def dev(netns_pair):
    return netns_pair["dev_a"], netns_pair["a"]


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_attach_configure_show_detach(dev):
    name, ns = dev
    res = cli("attach", "pin", name, "--netns", ns, "--pin", "10.99.0.2:0x123:0xC001")
    assert res.exit_code == 0, res.output
    res = cli("attach", "impair", name, "--netns", ns, "--drop", "0.25", "--udp-dport", 4791,
              "--direction", "ingress")
    assert res.exit_code == 0, res.output
    res = cli("configure", "pin", name, "--netns", ns, "--pin", "10.99.0.3:7:50000")
    assert res.exit_code == 0, res.output

    with Pin.attached(name, ns) as fs:
        assert sorted((e.dst_ip, e.sport) for e in fs.entries()) == [
            ("10.99.0.2", 0xC001), ("10.99.0.3", 50000)]
    with Impair.attached(name, ns) as imp:
        assert imp.config().drop == 0.25 and imp.config().udp_dport == 4791

    res = cli("show", name, "--netns", ns)
    assert res.exit_code == 0, res.output
    assert "pin at prio 10: egress pin_egress" in res.output
    assert "impair at prio 40: ingress impair_ingress" in res.output
    assert "pin to 10.99.0.3 QP 0x7: sport 50000" in res.output
    assert "drop 0.2500" in res.output

    res = cli("detach", "all", name, "--netns", ns)
    assert res.exit_code == 0 and "impair, pin" in res.output
    assert tc.filters(name, ns) == []
    assert "no programs" in cli("show", name, "--netns", ns).output


@pytest.mark.parametrize("args, message", [
    (["attach", "pin", "{dev}", "--pin", "10.99.0.2:1:70000"], "source port"),
    (["attach", "pin", "{dev}", "--pin", "10.99.0.2:1"], "DST_IP:QP"),
    (["attach", "spray", "{dev}", "--drop", "0.5"], "--drop does not apply to spray"),
    (["attach", "spray", "{dev}", "--range", "0xC010-0xC000"], "LAST is below FIRST"),
    (["attach", "spray", "{dev}", "--direction", "ingress"], "no ingress program"),
    (["attach", "impair", "{dev}", "--drop", "2"], "fraction"),
    (["attach", "reps", "{dev}", "--conn", "10.99.0.2:1"], "PEER_IP"),
    (["attach", "pin", "nope0"], "no interface 'nope0'"),
    (["configure", "reps", "{dev}", "--conn", "10.99.0.2:1:2:10.99.0.1"], "no reps program"),
])
def test_bad_input_changes_nothing(dev, args, message):
    name, ns = dev
    assert cli("attach", "pin", name, "--netns", ns,
               "--pin", "10.99.0.2:5:0xC005").exit_code == 0
    before = tc.filters(name, ns)
    res = cli(*[a.format(dev=name) for a in args], "--netns", ns)
    assert res.exit_code != 0
    assert message in res.output
    assert "Traceback" not in res.output
    assert tc.filters(name, ns) == before
    with Pin.attached(name, ns) as fs:
        assert [(e.dst_qp, e.sport) for e in fs.entries()] == [(5, 0xC005)]


def test_configure_checks_every_pin_before_writing(dev):
    name, ns = dev
    assert cli("attach", "pin", name, "--netns", ns).exit_code == 0
    res = cli("configure", "pin", name, "--netns", ns,
              "--pin", "10.99.0.2:5:0xC005", "--pin", "10.99.0.2:6:0")
    assert res.exit_code != 0 and "source port" in res.output
    with Pin.attached(name, ns) as fs:
        assert fs.entries() == []
