"""What every host program shares: compiling its C source with bcc, running it on a packet
with BPF_PROG_TEST_RUN, attaching it to an interface, and finding its maps again later."""
from __future__ import annotations

import os
import platform
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

from . import icrc, libbpf, tc
from .maps import Map

HERE = Path(__file__).parent
INCLUDE = HERE / "include"


class EbpfUnavailable(RuntimeError):
    """eBPF programs cannot be loaded on this machine; the message says what to do."""


class EbpfCompileError(RuntimeError):
    """A program's C source did not compile or was rejected by the verifier."""


def _check_machine() -> None:
    if os.geteuid() != 0:
        raise EbpfUnavailable("loading eBPF programs needs root: run this as root.")
    release = platform.release()
    if not Path(f"/lib/modules/{release}/build").exists():
        raise EbpfUnavailable(f"kernel headers for {release} are missing: run `make setup` "
                              "(installs linux-headers and links /lib/modules/<release>/build).")


@contextmanager
def _stderr_to(path: Path):
    """bcc's compiler writes diagnostics to file descriptor 2 directly; keep them in a file."""
    saved = os.dup(2)
    with open(path, "wb") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def compile_source(source: str, functions: list[str], cflags: list[str] | None = None):
    """Compiles `source` (a file beside this module) and loads `functions` as tc programs.
    Returns the bcc object (it owns the maps) and {function: program fd}."""
    _check_machine()
    try:
        from bcc import BPF
    except ImportError as exc:
        raise EbpfUnavailable("bcc does not import: install python3-bpfcc and run `make setup` "
                              "(the venv needs --system-site-packages).") from exc
    flags = [f"-I{INCLUDE}", *(cflags or [])]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "bcc.log"
        try:
            with _stderr_to(log):
                bpf = BPF(src_file=str(HERE / source).encode(), cflags=flags)
                fds = {fn: bpf.load_func(fn.encode(), BPF.SCHED_CLS).fd for fn in functions}
        except Exception as exc:
            details = log.read_text(errors="replace")[-4000:]
            raise EbpfCompileError(f"{source}: {exc}\n{details}") from exc
    return bpf, fds


def _has_table(bpf, name: str) -> bool:
    try:
        bpf.get_table(name.encode())
    except KeyError:
        return False
    return True


def _fill_icrc_shift(fd: int) -> None:
    """The programs that rewrite source ports keep the ICRC valid with this table (icrc.h)."""
    table = icrc.shift_table()
    size = len(table) // icrc.SHIFTS
    for n in range(icrc.SHIFTS):
        libbpf.map_update(fd, n.to_bytes(4, "little"), table[size * n:size * (n + 1)])


class Program:
    """A loaded program: its tc functions (by direction) and its typed maps."""

    SOURCE: ClassVar[str]
    HOOKS: ClassVar[dict[str, str]]  # direction -> C function
    PRIO: ClassVar[int]              # tc filter priority: fixes the order on a shared hook
    MAPS: ClassVar[dict[str, tuple]]  # name -> (key type, value type, per-CPU?)
    DEFINES: ClassVar[dict[str, int]] = {}  # sizes shared by the C source and the Python types

    def __init__(self, prog_fds: dict[str, int], map_fds: dict[str, int], owner=None,
                 owned_fds: tuple[int, ...] = ()):
        self.prog_fds = prog_fds  # direction -> fd
        self.maps = {name: Map(map_fds[name], *spec) for name, spec in self.MAPS.items()}
        self._owner = owner  # the bcc object keeps program and map fds open
        self._owned_fds = owned_fds

    @classmethod
    def load(cls):
        defines = cls.DEFINES | {"ICRC_SHIFTS": icrc.SHIFTS}
        cflags = [f"-D{name}={value}" for name, value in defines.items()]
        bpf, fds = compile_source(cls.SOURCE, list(cls.HOOKS.values()), cflags)
        prog_fds = {d: fds[fn] for d, fn in cls.HOOKS.items()}
        map_fds = {name: bpf.get_table(name.encode()).map_fd for name in cls.MAPS}
        if _has_table(bpf, "icrc_shift"):
            _fill_icrc_shift(bpf.get_table(b"icrc_shift").map_fd)
        return cls(prog_fds, map_fds, owner=bpf)

    @classmethod
    def attached(cls, dev: str, netns: str | None = None):
        """The maps of the instance attached to `dev`, reached through kernel object ids,
        so that another process (the CLI, a host agent) can read and configure it."""
        mine = [f for f in tc.filters(dev, netns)
                if f.prio == cls.PRIO and f.name in cls.HOOKS.values() and f.prog_id]
        if not mine:
            where = f" in namespace {netns}" if netns else ""
            raise tc.TcError(f"no {cls.SOURCE[:-2]} program is attached to {dev}{where}")
        fds: dict[str, int] = {}
        try:
            # One hook's program may use only some of the maps (reps_egress never reads
            # reps_acks): gather them from every hook.
            map_ids = dict.fromkeys(i for f in mine for i in libbpf.prog_map_ids(f.prog_id))
            for map_id in map_ids:
                fd = libbpf.map_fd_by_id(map_id)
                name = libbpf.map_info(fd).name
                if name in cls.MAPS and name not in fds:
                    fds[name] = fd
                else:
                    os.close(fd)
            missing = set(cls.MAPS) - set(fds)
            if missing:
                raise tc.TcError(f"the program on {dev} lacks maps {sorted(missing)}: "
                                 "not one of ours")
            return cls({}, fds, owned_fds=tuple(fds.values()))
        except Exception:
            for fd in fds.values():
                os.close(fd)
            raise

    def close(self) -> None:
        for fd in self._owned_fds:
            os.close(fd)
        self._owned_fds = ()
        if self._owner is not None:
            self._owner.cleanup()
            self._owner = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _direction(self, direction: str | None) -> str:
        if direction is None:
            if len(self.HOOKS) != 1:
                raise ValueError(f"say which hook: one of {sorted(self.HOOKS)}")
            direction = next(iter(self.HOOKS))
        if direction not in self.HOOKS:
            raise ValueError(f"{self.SOURCE[:-2]} has no {direction} program "
                             f"(it has {sorted(self.HOOKS)})")
        if direction not in self.prog_fds:
            raise ValueError("this handle was opened from an attached program: only its maps "
                             "are reachable")
        return direction

    def run(self, packet: bytes, direction: str | None = None, repeat: int = 1):
        """Runs the program on one packet (BPF_PROG_TEST_RUN); returns libbpf.RunResult."""
        direction = self._direction(direction)
        return libbpf.prog_test_run(self.prog_fds[direction], packet, repeat)

    def attach(self, dev: str, netns: str | None = None,
               directions: tuple[str, ...] | None = None) -> None:
        """Attaches to `dev` (all of this program's hooks unless `directions` narrows them),
        atomically replacing an earlier instance at the same priority."""
        for direction in directions or tuple(self.HOOKS):
            self._direction(direction)
            tc.attach(self.prog_fds[direction], self.HOOKS[direction], dev, direction,
                      self.PRIO, netns)

    @classmethod
    def detach(cls, dev: str, netns: str | None = None) -> bool:
        """Removes this kind of program from both hooks of `dev`; False when none was there."""
        removed = False
        for direction in tc.PARENTS:
            removed |= tc.detach(dev, direction, cls.PRIO, netns)
        return removed
