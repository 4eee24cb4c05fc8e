"""The pip requirements of the image's two services (fabric: mininet/fabric_up.py and its
p4switch switches; fabricd and fabricctl), with the versions pyproject.toml pins: printed one
a line for `pip install -r`. The demo and test jobs get the rest from scripts/setup.sh.

    python3 docker/requirements.py pyproject.toml > requirements.txt

Only these lines reach the slow pip layer, so an edit elsewhere in pyproject.toml (a test
option, a dependency only the demo uses) leaves that layer cached.
"""
from __future__ import annotations

import re
import sys
import tomllib

# What p4switch, controller, fabricmodel, grpctls and mininet/fabric_up.py import (p4 and
# google.protobuf come with p4runtime-shell); matplotlib, scikit-learn, dask and the other
# analysis packages are the demo's, sim's and tests'.
SERVICES = ("p4runtime-shell", "grpcio", "scapy", "lark", "pyyaml", "jsonschema", "tabulate",
            "click", "numpy", "starlette", "uvicorn", "thrift")


def services_requirements(pyproject: dict) -> list[str]:
    """The SERVICES entries of [project] dependencies, in pyproject's order; a SERVICES name
    pyproject does not list is an error (the image would miss it)."""
    found = {}
    for spec in pyproject["project"]["dependencies"]:
        name = re.match(r"[A-Za-z0-9._-]+", spec).group(0).lower()
        if name in SERVICES:
            found[name] = spec
    missing = [name for name in SERVICES if name not in found]
    if missing:
        raise SystemExit(f"requirements: pyproject.toml lists no {', '.join(missing)}")
    return list(found.values())


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        print("\n".join(services_requirements(tomllib.load(f))))
