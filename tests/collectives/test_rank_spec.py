"""The rank spec (launcher -> rank process) and `python -m collectives run` and `train`'s
options as dataclasses: written once, read back the same, refused with the field named."""
from __future__ import annotations

import click
import pytest

from collectives.cli import RunOptions, TrainOptions, main
from collectives.comm import CommConfig
from collectives.rank_spec import RankSpec, RankSpecError
from collectives.runner import elements_of


def test_rank_spec_round_trip_and_defaults(tmp_path):
    spec = RankSpec(["10.0.1.1", "10.0.2.1"], 1, [{"collective": "allreduce", "algo": "ring",
                                                   "dtype": "int32", "elements": 4}],
                    str(tmp_path / "r.jsonl"), {"mtu": 4096}, "reps", qps=2, fabric={"a": 1})
    spec.write(tmp_path / "spec.json")
    assert RankSpec.read(tmp_path / "spec.json") == spec
    bare = RankSpec(["10.0.1.1", "10.0.2.1"], 0)
    comm = CommConfig(bare.ips, 0, transport=None)
    assert (bare.port, bare.timeout, bare.join_timeout, bare.policy, bare.qps) == \
        (comm.port, comm.timeout, comm.join_timeout, comm.policy, comm.qps)


@pytest.mark.parametrize("text, message", [
    ('{"ips": ["10.0.1.1"], "rank": 0, "polciy": "reps"}', "unknown field 'polciy'"),
    ('{"rank": 0}', "no 'ips'"),
    ('{"ips": "10.0.1.1", "rank": 0}', "'ips' must be a list of addresses"),
    ('{"ips": ["10.0.1.1"], "rank": "0"}', "'rank' must be an integer"),
    ('[1, 2]', "a JSON object, not list"),
    ('{"ips": [', "rank spec"),
])
def test_a_bad_rank_spec_names_its_field(tmp_path, text, message):
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(RankSpecError, match=message) as err:
        RankSpec.read(path)
    assert str(path) in str(err.value)


def _options(args: list[str]) -> RunOptions:
    ctx = main.commands["run"].make_context("run", args)
    return RunOptions.parse(**ctx.params)


def test_run_options_map_onto_one_dataclass():
    opts = _options(["--ips", "10.0.1.1,10.0.2.1", "--algo", "netreduce", "--aggregator",
                     "10.0.1.253,10.0.2.253", "--size", "64K", "--dtype", "float32",
                     "--repeat", "2", "--policy", "ethereal", "--mtu", "4096"])
    assert opts.ips == ["10.0.1.1", "10.0.2.1"] and opts.namespaces is None
    assert len(opts.runs) == 2 and opts.runs[0] == opts.runs[1]
    assert opts.runs[0]["elements"] == elements_of(64 << 10, "float32") == 16384
    assert opts.runs[0]["options"] == {"aggregator": ["10.0.1.253", "10.0.2.253"],
                                       "job_id": 1, "credits": 8}
    assert opts.policy == "ethereal" and opts.transport["mtu"] == 4096
    assert opts.port == RankSpec.port


def test_train_options_map_onto_one_dataclass():
    topo = "controller/topologies/leafspine-2x2.yaml"
    ctx = main.commands["train"].make_context("train", ["--topology", topo, "--algos", "ring",
                                                        "--epochs", "2", "--min-rto", "0.01"])
    opts = TrainOptions.parse(**ctx.params)
    assert [h.name for h in opts.hosts] == ["h1", "h2", "h3", "h4"]
    assert opts.algos == ["ring"] and opts.cfg.epochs == 2 and opts.transport == {"min_rto": 0.01}
    ctx = main.commands["train"].make_context("train", ["--topology", topo, "--algos",
                                                        "ring,netreduce"])
    with pytest.raises(click.BadParameter, match="fabricd"):
        TrainOptions.parse(**ctx.params)
