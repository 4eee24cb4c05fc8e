"""The rank spec: what the launcher (collectives.launch) tells each rank process, written as
one JSON file per rank and read back by the rank program (collectives.runner, .train,
.torch_train). The defaults are the communicator's (collectives.comm.CommConfig)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .comm import CommConfig
from .results import write_jsonl


class RankSpecError(ValueError):
    """A rank spec that is not one: the message names the file and the field."""


@dataclass
class RankSpec:
    ips: list[str]                   # every rank's address, rank 0 first
    rank: int
    runs: list[dict] = field(default_factory=list)   # what the rank program runs, in order
    results: str | None = None       # where the rank writes its result lines
    transport: dict = field(default_factory=dict)    # collectives.transport.TransportConfig's
    policy: str = CommConfig.policy  # a fabricmodel.policies name
    qps: int = CommConfig.qps
    seed: int = CommConfig.seed
    port: int = CommConfig.port      # rank 0's TCP rendezvous
    timeout: float = CommConfig.timeout
    join_timeout: float = CommConfig.join_timeout
    topology: str | None = None      # the topology file Ethereal plans on
    fabric: dict | None = None       # fabricd's view of the installed fabric (fabric_view)
    dev: str | None = None           # the rank's interface: its policy's eBPF program is there
    out: str | None = None           # a folder for the rank's outputs (arrays, traces)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, path: str | Path) -> RankSpec:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise RankSpecError(f"rank spec {path}: {exc}") from None
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: dict, where: str = "rank spec") -> RankSpec:
        """The spec of `data` (a launcher's JSON object); RankSpecError naming the first field
        that is unknown, missing or of the wrong kind."""
        if not isinstance(data, dict):
            raise RankSpecError(f"{where}: a JSON object, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RankSpecError(f"{where}: unknown field {unknown[0]!r}")
        for name in ("ips", "rank"):
            if name not in data:
                raise RankSpecError(f"{where}: no {name!r}")
        spec = cls(**data)
        checks = (("ips", isinstance(spec.ips, list) and all(isinstance(i, str) for i in spec.ips),
                   "a list of addresses"),
                  ("rank", isinstance(spec.rank, int) and not isinstance(spec.rank, bool),
                   "an integer"),
                  ("runs", isinstance(spec.runs, list), "a list"),
                  ("transport", isinstance(spec.transport, dict), "an object"),
                  ("policy", isinstance(spec.policy, str), "a policy name"))
        for name, ok, what in checks:
            if not ok:
                raise RankSpecError(f"{where}: {name!r} must be {what}, not "
                                    f"{getattr(spec, name)!r}")
        return spec


def rank_main(run_spec, argv: list[str]) -> int:
    """The main of a rank program (`python -m PROGRAM SPEC.json`): the rows of run_spec(the
    spec in file argv[0]) appended to the spec's results file."""
    spec = RankSpec.read(argv[0])
    write_jsonl(run_spec(spec), spec.results)
    return 0
