"""Typed access to a BPF map through its file descriptor: keys and values are ctypes
structures that mirror the C declarations beside each program."""
from __future__ import annotations

import ctypes
from collections.abc import Iterator

from . import libbpf


class Map:
    """A hash or array map; for per-CPU maps `get` returns one value per possible CPU."""

    def __init__(self, fd: int, key_type: type, value_type: type, percpu: bool = False):
        self.fd = fd
        self.key_type = key_type
        self.value_type = value_type
        self.percpu = percpu
        self._slot = (ctypes.sizeof(value_type) + 7) & ~7  # per-CPU values are 8-byte aligned
        info = libbpf.map_info(fd)
        if info.key_size != ctypes.sizeof(key_type) or \
                info.value_size != ctypes.sizeof(value_type):
            raise TypeError(f"map {info.name}: kernel sizes {info.key_size}/{info.value_size} "
                            f"differ from {key_type.__name__}/{value_type.__name__}")

    def _value_size(self) -> int:
        if self.percpu:
            return self._slot * libbpf.possible_cpus()
        return ctypes.sizeof(self.value_type)

    def get(self, key):
        raw = libbpf.map_lookup(self.fd, bytes(key), self._value_size())
        if raw is None:
            return None
        if not self.percpu:
            return self.value_type.from_buffer_copy(raw)
        return [self.value_type.from_buffer_copy(raw, cpu * self._slot)
                for cpu in range(libbpf.possible_cpus())]

    def set(self, key, value, flags: int = libbpf.BPF_ANY) -> None:
        """`value` is one structure; a per-CPU map gets it on every CPU."""
        data = bytes(value)
        if self.percpu:
            data = data.ljust(self._slot, b"\0") * libbpf.possible_cpus()
        libbpf.map_update(self.fd, bytes(key), data, flags)

    def delete(self, key) -> bool:
        return libbpf.map_delete(self.fd, bytes(key))

    def keys(self) -> Iterator:
        for raw in libbpf.map_keys(self.fd, ctypes.sizeof(self.key_type)):
            yield self.key_type.from_buffer_copy(raw)

    def clear(self) -> None:
        for key in list(self.keys()):
            self.delete(key)
