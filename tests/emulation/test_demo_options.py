"""mininet/demo_options.py: the demo's click options map onto one DemoOptions, grouped as the
parts use them, and a bad option is refused naming itself before anything starts."""
from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.demo_modules import demo_modules

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("mininet.net", reason="the demo needs Mininet (Debian's mininet)")
demo, demo_options = demo_modules("demo", "demo_options")


def options(*args: str):
    """The DemoOptions of the demo's command line `args` (click parses, nothing runs)."""
    ctx = demo.main.make_context("demo", list(args))
    return demo_options.DemoOptions.parse(**ctx.params)


def test_demo_defaults_group_into_the_parts():
    opts = options()
    one, two = opts.part_one, opts.part_two
    assert opts.target == "p4switch" and one.enabled and two.enabled
    assert one.size == demo_options.SIZE["p4switch"]
    assert [(r["collective"], r["algo"]) for r in one.runs] == [
        ("allreduce", "ring"), ("allreduce", "halving-doubling"), ("alltoall", "direct")]
    assert all(r["elements"] == 4 * 2 ** 20 // 4 for r in one.runs)
    assert one.failure_run == {"collective": "alltoall", "algo": "direct", "dtype": "int32",
                               "elements": 2 ** 20}
    assert one.link_mbps == demo_options.LINK_MBPS and one.adapt_rate
    assert two.link_mbps == demo_options.IDEAS_LINK_MBPS and two.elements == 64 * 1024 // 4
    assert "train" in two.ideas and opts.output.out_dir == ROOT / "out"


def test_demo_options_on_bmv2_and_a_given_rate():
    opts = options("--target", "bmv2", "--link-mbps", "1.5", "--no-train", "--size", "8KiB",
                   "--pcap", "--queue-depth", "64")
    assert opts.part_one.size == "8KiB" and opts.part_one.runs[0]["elements"] == 2048
    assert opts.part_one.link_mbps == 1.5 and not opts.part_one.adapt_rate
    assert opts.part_two.link_mbps == 2.0                  # p4_switch.MAX_LINK_MBPS["bmv2"]
    assert "train" not in opts.part_two.ideas
    assert opts.output.pcap and not opts.output.switch_logs
    # the minimum RTO: twice a full queue's drain time at each part's rate unless given
    drained = opts.transport.config(1.5)
    assert drained["min_rto"] == demo_options.drain_rto(64, 1.5) > \
        demo_options.drain_rto(64, 2.0)
    fixed = options("--min-rto", "0.25").transport.config(96.0)
    assert fixed["min_rto"] == 0.25 and fixed["mtu"] == demo_options.MTU


@pytest.mark.parametrize(("args", "hint"), [
    (["--link-mbps", "fast"], "--link-mbps"),
    (["--link-mbps", "-1"], "--link-mbps"),
    (["--failure-collective", "alltoall/direct,allreduce/ring"], "--failure-collective"),
    (["--policies", "ecmp,teleport"], "--policies"),
])
def test_demo_refuses_a_bad_option_naming_it(args, hint):
    with pytest.raises(click.BadParameter) as err:
        options(*args)
    assert err.value.param_hint == hint
    # through the command itself: exit 2 with the option named, before any root check or setup
    res = CliRunner().invoke(demo.main, args)
    assert res.exit_code == 2 and hint in res.output, res.output


def test_demo_refuses_a_command_line_with_nothing_to_run():
    with pytest.raises(click.UsageError, match="nothing to run"):
        options("--no-part-one", "--no-ideas")
    with pytest.raises(click.UsageError, match="--no-train"):
        options("--ideas-only", "train", "--no-train")
