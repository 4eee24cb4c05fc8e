"""A stamp's command names no path of the machine it ran on (docs/ pages show it)."""
from __future__ import annotations

from results.record import ROOT, portable


def test_stamp_paths_are_portable():
    cmd = (f"mininet/demo.py --out /tmp/fid-bench/quiet --topology {ROOT}/controller/x.yaml "
           f"--corpus=/work/corpus/bmv2_passes.txt --size 4MiB")
    assert portable(cmd) == ("mininet/demo.py --out …/quiet --topology controller/x.yaml "
                             "--corpus=…/bmv2_passes.txt --size 4MiB")
    assert portable("python -m sim ethereal --hosts 4") == "python -m sim ethereal --hosts 4"
