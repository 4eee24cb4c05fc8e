"""C and C++ compiled at run time with the system compiler, cached by content hash: p4switch's
native backend (a program's generated C), the hosts' native transport (collectives/native), the
simulator's engine (sim/engine.cpp) and the benchmarks' tools (bench/trafgen.c). A build is
written to a temporary name and renamed into the cache, so processes that build the same source
at once never load a half-written file."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def compiler(cxx: bool = False) -> str | None:
    """`$CC` or `cc` on PATH (`$CXX` or `c++` for C++); None where the machine has none."""
    return shutil.which(os.environ.get("CXX", "c++") if cxx else os.environ.get("CC", "cc"))


def cache_dir(name: str) -> Path:
    """`$XDG_CACHE_HOME/NAME` (default ~/.cache/NAME), made if missing."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = Path(base) / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def built(source: str, flags: list[str], suffix: str, purpose: str, cache: str,
          cxx: bool = False) -> Path:
    """The compiled `source` (`suffix` ".so" for a shared object, "" for a program; C++ if
    `cxx`), built once per (flags, source) into the cache `cache`; RuntimeError naming
    `purpose` when there is no compiler or the compiler fails."""
    cc = compiler(cxx)
    if cc is None:
        raise RuntimeError(f"{purpose} needs a {'C++' if cxx else 'C'} compiler and none was found")
    digest = hashlib.sha256((" ".join(flags) + "\n" + source).encode()).hexdigest()[:24]
    where = cache_dir(cache)
    out_path = where / f"{digest}{suffix}"
    if out_path.exists():
        return out_path
    with tempfile.TemporaryDirectory() as tmp:
        c = Path(tmp) / ("prog.cpp" if cxx else "prog.c")
        c.write_text(source)
        out = Path(tmp) / "prog.out"
        run = subprocess.run([cc, *flags, "-o", str(out), str(c)], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"{cc} failed on {purpose}'s source:\n{run.stderr[-4000:]}")
        part = where / f"{digest}.{os.getpid()}.tmp"
        shutil.copy2(out, part)
        os.replace(part, out_path)
    return out_path
