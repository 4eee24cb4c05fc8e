"""Compiles a program's C with the system C compiler, cached by content hash (`nativebuild`),
and loads it with ctypes. Every load gets its own copy of the shared object, so two switches
running the same program in one process do not share tables or registers. `executable` builds a standalone C tool
(bench/trafgen.c) into the same cache."""
from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from pathlib import Path

from nativebuild import built

CFLAGS = ["-O2", "-shared", "-fPIC", "-pthread", "-w"]
CACHE = "p4switch-native"


def shared_object(source: str) -> Path:
    """The program's shared object, built once per content."""
    return built(source, CFLAGS, ".so", "the native backend", CACHE)


def executable(source: str, flags: tuple[str, ...] = ("-O2",),
               purpose: str = "this tool") -> Path:
    """A C program (e.g. bench/trafgen.c) built once per content into the same cache."""
    return built(source, list(flags), "", purpose, CACHE)


def load(source: str) -> ctypes.CDLL:
    so = shared_object(source)
    fd, private = tempfile.mkstemp(suffix=".so", prefix="p4switch-")
    os.close(fd)
    try:
        shutil.copyfile(so, private)
        lib = ctypes.CDLL(private)
    finally:
        os.unlink(private)
    _signatures(lib)
    return lib


def _signatures(lib):
    u32, u64p, u32p = ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    lib.sw_process.argtypes = [u32, ctypes.c_char_p, u32, ctypes.c_void_p, u32, u32p, u32]
    lib.sw_process.restype = ctypes.c_int
    lib.sw_bench.argtypes = [u32, ctypes.c_char_p, u32, u32]
    lib.sw_bench.restype = ctypes.c_double
    lib.sw_table_set.argtypes = [ctypes.c_int, u32, u64p, u64p, u64p, ctypes.c_int]
    lib.sw_table_default.argtypes = [ctypes.c_int, ctypes.c_uint64, u64p]
    lib.sw_table_counters.argtypes = [ctypes.c_int, u64p, u64p, u64p]
    lib.sw_table_counters.restype = u32
    lib.sw_table_hits.argtypes = [ctypes.c_int, u64p, u64p]
    lib.sw_table_hits.restype = u32
    lib.sw_profile_set.argtypes = [ctypes.c_int, u32, u64p, u32, u64p, u32]
    lib.sw_mc_set.argtypes = [u32, ctypes.c_int, u32, u32p]
    lib.sw_clone_set_all.argtypes = [u32, u64p]
    lib.sw_value_set.argtypes = [ctypes.c_int, u32, u64p]
    d = ctypes.c_double
    lib.sw_meter_set.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_int, d, d, d, d]
    lib.sw_register.argtypes = [ctypes.c_int]
    lib.sw_register.restype = u64p
    lib.sw_counter.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.sw_counter.restype = u64p
    lib.sw_digests.argtypes = [u64p, u32]
    lib.sw_digests.restype = u32
    lib.sw_assert_info.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    i, ip = ctypes.c_int, ctypes.POINTER(ctypes.c_int)
    lib.dev_set_queue.argtypes = [i, u32, ctypes.c_double, i, i, i]
    lib.dev_queues.argtypes = [u32p, ctypes.POINTER(ctypes.c_double), u32]
    lib.dev_queues.restype = u32
    lib.dev_fidelity.argtypes = [d, d, u32p, ctypes.POINTER(ctypes.c_double), u32]
    lib.dev_fidelity.restype = u32
    lib.dev_inject.argtypes = [u32, ctypes.c_char_p, u32]
    lib.dev_configure.argtypes = [i, ip, u32p, i, i, i]
    lib.dev_rings_open.argtypes = [i, ip, u32p]
    lib.dev_rings_open.restype = i
    lib.dev_rings_close.argtypes = [i, ip, u32p]
    lib.dev_ingress_loop.argtypes = [i, ip, u32p, i, ip]
    lib.dev_ingress_loop.restype = i
    lib.dev_counts.argtypes = [u64p]
