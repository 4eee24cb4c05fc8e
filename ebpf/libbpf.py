"""The few libbpf calls this package needs, through ctypes on the system's libbpf.so.1:
loading a program given as instructions, running a program on a packet (BPF_PROG_TEST_RUN),
raw map access by file descriptor, and finding an attached program's maps by id."""
from __future__ import annotations

import ctypes
import errno
import os
from dataclasses import dataclass
from functools import cache

BPF_ANY = 0
BPF_NOEXIST = 1
BPF_EXIST = 2
BPF_F_LOCK = 4


class BpfError(OSError):
    """A failed bpf() operation, with the operation named."""


class _TestRunOpts(ctypes.Structure):
    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("data_in", ctypes.c_void_p),
        ("data_out", ctypes.c_void_p),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_void_p),
        ("ctx_out", ctypes.c_void_p),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("repeat", ctypes.c_int),
        ("duration", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("cpu", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
    ]


class _MapInfo(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("key_size", ctypes.c_uint32),
        ("value_size", ctypes.c_uint32),
        ("max_entries", ctypes.c_uint32),
        ("map_flags", ctypes.c_uint32),
        ("name", ctypes.c_char * 16),
        ("_rest", ctypes.c_uint8 * 64),  # later fields of struct bpf_map_info, unused
    ]


class _ProgInfo(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("tag", ctypes.c_uint8 * 8),
        ("jited_prog_len", ctypes.c_uint32),
        ("xlated_prog_len", ctypes.c_uint32),
        ("jited_prog_insns", ctypes.c_uint64),
        ("xlated_prog_insns", ctypes.c_uint64),
        ("load_time", ctypes.c_uint64),
        ("created_by_uid", ctypes.c_uint32),
        ("nr_map_ids", ctypes.c_uint32),
        ("map_ids", ctypes.c_uint64),
        ("name", ctypes.c_char * 16),
        ("_rest", ctypes.c_uint8 * 256),  # later fields of struct bpf_prog_info, unused
    ]


@cache
def _lib() -> ctypes.CDLL:
    lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
    lib.bpf_prog_test_run_opts.argtypes = [ctypes.c_int, ctypes.POINTER(_TestRunOpts)]
    lib.bpf_map_lookup_elem_flags.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_uint64]
    lib.bpf_map_get_next_key.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.bpf_map_update_elem.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_uint64]
    lib.bpf_map_delete_elem.argtypes = [ctypes.c_int, ctypes.c_void_p]
    lib.bpf_obj_get_info_by_fd.argtypes = [ctypes.c_int, ctypes.c_void_p,
                                           ctypes.POINTER(ctypes.c_uint32)]
    lib.bpf_prog_load.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                                  ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p]
    return lib


def _check(ret: int, what: str) -> int:
    """libbpf 1.x returns -errno directly (and sets errno)."""
    if ret < 0:
        code = -ret
        raise BpfError(code, f"{what}: {os.strerror(code)}")
    return ret


@dataclass(frozen=True)
class RunResult:
    retval: int   # the program's return code as a signed int (TC_ACT_*)
    data: bytes   # the packet after the program ran
    duration_ns: int  # average per repetition


BPF_PROG_TYPE_SCHED_CLS = 3


def prog_load(prog_type: int, name: str, insns: bytes, license: str = "GPL") -> int:
    """Loads a program given as struct bpf_insn records; returns its file descriptor."""
    return _check(_lib().bpf_prog_load(prog_type, name.encode(), license.encode(), insns,
                                       len(insns) // 8, None), f"loading {name}")


def prog_test_run(prog_fd: int, packet: bytes, repeat: int = 1) -> RunResult:
    """Runs a loaded program on one packet with BPF_PROG_TEST_RUN."""
    data_in = ctypes.create_string_buffer(packet, len(packet))
    out_size = len(packet) + 256  # room for programs that grow the packet
    data_out = ctypes.create_string_buffer(out_size)
    opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts),
                        data_in=ctypes.cast(data_in, ctypes.c_void_p),
                        data_out=ctypes.cast(data_out, ctypes.c_void_p),
                        data_size_in=len(packet), data_size_out=out_size, repeat=repeat)
    _check(_lib().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts)), "BPF_PROG_TEST_RUN")
    retval = ctypes.c_int32(opts.retval).value
    return RunResult(retval, data_out.raw[:opts.data_size_out], opts.duration)


def map_lookup(fd: int, key: bytes, value_size: int, flags: int = 0) -> bytes | None:
    value = ctypes.create_string_buffer(value_size)
    ret = _lib().bpf_map_lookup_elem_flags(fd, key, value, flags)
    if ret == -errno.ENOENT:
        return None
    _check(ret, "map lookup")
    return value.raw


def map_update(fd: int, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
    _check(_lib().bpf_map_update_elem(fd, key, value, flags), "map update")


def map_delete(fd: int, key: bytes) -> bool:
    """Deletes one entry; False when it was not there."""
    ret = _lib().bpf_map_delete_elem(fd, key)
    if ret == -errno.ENOENT:
        return False
    _check(ret, "map delete")
    return True


def map_keys(fd: int, key_size: int) -> list[bytes]:
    keys = []
    prev = None
    nxt = ctypes.create_string_buffer(key_size)
    while True:
        ret = _lib().bpf_map_get_next_key(fd, prev, nxt)
        if ret == -errno.ENOENT:
            return keys
        _check(ret, "map iteration")
        keys.append(nxt.raw)
        prev = ctypes.create_string_buffer(nxt.raw, key_size)


@cache
def possible_cpus() -> int:
    return _check(_lib().libbpf_num_possible_cpus(), "counting possible CPUs")


@dataclass(frozen=True)
class MapInfo:
    id: int
    name: str
    key_size: int
    value_size: int


def map_info(fd: int) -> MapInfo:
    info = _MapInfo()
    size = ctypes.c_uint32(ctypes.sizeof(info))
    _check(_lib().bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)),
           "map info")
    return MapInfo(info.id, info.name.decode(), info.key_size, info.value_size)


def prog_map_ids(prog_id: int) -> list[int]:
    """The ids of the maps a loaded program uses."""
    fd = _check(_lib().bpf_prog_get_fd_by_id(prog_id), f"opening program id {prog_id}")
    try:
        info = _ProgInfo()
        size = ctypes.c_uint32(ctypes.sizeof(info))
        _check(_lib().bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)),
               "program info")
        ids = (ctypes.c_uint32 * info.nr_map_ids)()
        info2 = _ProgInfo(nr_map_ids=info.nr_map_ids,
                          map_ids=ctypes.cast(ids, ctypes.c_void_p).value)
        size = ctypes.c_uint32(ctypes.sizeof(info2))
        _check(_lib().bpf_obj_get_info_by_fd(fd, ctypes.byref(info2), ctypes.byref(size)),
               "program info")
        return list(ids)
    finally:
        os.close(fd)


def map_fd_by_id(map_id: int) -> int:
    """A new file descriptor for a map (the caller closes it)."""
    return _check(_lib().bpf_map_get_fd_by_id(map_id), f"opening map id {map_id}")
