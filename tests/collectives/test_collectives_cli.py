"""`python -m collectives run` by hand: table, JSON lines, precise errors on bad arguments."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from collectives import launch
from collectives.cli import main
from ebpf import EbpfUnavailable, program
from fabricmodel.topology import load


@pytest.mark.netns
def test_run_prints_a_table_and_writes_json_lines(bridge_net, tmp_path):
    net = bridge_net(4)
    out = tmp_path / "r.jsonl"
    res = CliRunner().invoke(main, ["run", "--ips", ",".join(net.ips), "--netns",
                                    ",".join(net.namespaces), "--collective", "allreduce",
                                    "--algo", "halving-doubling", "--size", "64K",
                                    "--reliability", "sr", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "halving-doubling" in res.output and "yes" in res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and all(r["elements"] == 16384 and r["ok"] for r in rows)
    table = CliRunner().invoke(main, ["table", str(out)])
    assert table.exit_code == 0 and "CCT ms" in table.output


@pytest.mark.netns
def test_run_takes_rank_addresses_from_a_topology_file(bridge_net):
    path = "controller/topologies/leafspine-2x2.yaml"
    topo = load(path)
    net = bridge_net(4, addresses=[topo.host_by_rank(r).ip for r in range(4)], prefix=8)
    res = CliRunner().invoke(main, ["run", "--topology", path, "--netns",
                                    ",".join(net.namespaces), "--policy", "ethereal",
                                    "--collective", "alltoall", "--algo", "direct",
                                    "--size", "100K"])
    assert res.exit_code == 0, res.output
    assert "ethereal" in res.output and "yes" in res.output


@pytest.mark.parametrize("args,message", [
    (["--ips", "10.0.0.1"], "at least two"),
    (["--topology", "controller/topologies/leafspine-2x2.yaml", "--ranks", "9"],
     "has 4 hosts, not 9"),
    (["--ips", "10.0.0.1,10.0.0.2", "--netns", "a"], "1 namespaces for 2"),
    (["--ips", "10.0.0.1,10.0.0.2", "--collective", "alltoall", "--algo", "ring"],
     "no algorithm 'ring' for alltoall"),
    (["--ips", "10.0.0.1,10.0.0.2", "--algo", "switchml"], "needs --aggregator"),
    (["--ips", "10.0.0.1,10.0.0.2", "--algo", "netreduce"], "needs --aggregator"),
    (["--ips", "10.0.0.1,10.0.0.2,10.0.0.3", "--algo", "netreduce", "--aggregator",
      "10.0.1.253,10.0.2.253"], "2 aggregator addresses for 3 ranks"),
    (["--ips", "10.0.0.1,10.0.0.2", "--size", "lots"], "not a size"),
    (["--ips", "10.0.0.1,10.0.0.2", "--policy", "random"], "Invalid value for '--policy'"),
])
def test_bad_arguments_are_refused_before_anything_starts(args, message):
    res = CliRunner().invoke(main, ["run", *args])
    assert res.exit_code == 2 and message in res.output, res.output


@pytest.mark.parametrize("policy", ["spray", "reps", "ethereal"])
def test_a_policy_in_ebpf_stops_with_one_sentence_where_ebpf_cannot_load(monkeypatch, policy):
    def unavailable():
        raise EbpfUnavailable("kernel headers for 6.1.0 are missing: run `make setup`.")

    monkeypatch.setattr(program, "_check_machine", unavailable)
    monkeypatch.setattr(launch, "_loaded", {})
    res = CliRunner().invoke(main, ["run", "--ips", "10.0.0.1,10.0.0.2", "--policy", policy])
    assert res.exit_code == 1
    assert res.output.strip() == (f"Error: policy {policy} runs in eBPF, which cannot be loaded "
                                  "here: kernel headers for 6.1.0 are missing: run `make setup`.")


TOPO = "controller/topologies/leafspine-2x2.yaml"


@pytest.mark.parametrize("args,hint", [
    (["--algos", "ring,teleport"], "--algos"),
    (["--parallel", "fsdp", "--allgathers", "tree"], "--allgathers"),
    (["--algos", "ring,netreduce"], "--fabricd"),
    (["--parallel", "fsdp", "--allgathers", "multicast"], "--fabricd"),
    (["--netns", "a,b"], "--netns"),
])
def test_torchrun_refuses_bad_options_naming_them(args, hint):
    pytest.importorskip("torch", reason="torchrun needs PyTorch")
    res = CliRunner().invoke(main, ["torchrun", "--topology", TOPO, *args])
    assert res.exit_code == 2 and hint in res.output, res.output


def test_torchrun_options_map_onto_one_object():
    pytest.importorskip("torch", reason="torchrun needs PyTorch")
    from collectives.cli import TorchrunOptions, torchrun
    ctx = torchrun.make_context("torchrun", ["--topology", TOPO, "--ranks", "3", "--model",
                                             "mlp", "--epochs", "2", "--min-rto", "0.5",
                                             "--fabricd", "127.0.0.1:1"])
    opts = TorchrunOptions.parse(**ctx.params)
    assert [h.name for h in opts.hosts] == ["h1", "h2", "h3"]
    assert opts.algos == ["ring", "netreduce", "switchml"] and opts.reference
    assert (opts.cfg.model, opts.cfg.parallel, opts.cfg.epochs) == ("mlp", "ddp", 2)
    assert opts.transport == {"min_rto": 0.5} and opts.namespaces is None
