"""engine.cpp, built with the system C++ compiler through `nativebuild` (cached by the hash of
its source and flags: the first process on a machine compiles it, 10-20 s, every later one
loads the cached shared object in milliseconds) and driven through its C functions with ctypes.

`Engine` is one simulation's engine: the methods and attributes engine.cpp's `Fabric` has, with
Python callables as its callbacks. A callback that raises stops the run, and `run` raises its
error."""
from __future__ import annotations

import ctypes
import pathlib
from ctypes import POINTER, c_double, c_int, c_int64, c_uint8, c_uint16, c_uint32, c_uint64

import numpy as np

from fabricmodel import rocev2
from nativebuild import built

SOURCE = pathlib.Path(__file__).with_name("engine.cpp")
# -ffp-contract=off: no fused multiply-add, so the same results on every CPU and compiler.
FLAGS = ["-std=c++17", "-O2", "-shared", "-fPIC", "-ffp-contract=off", "-Wall", "-Werror"]
HEADER_BYTES = rocev2.FRAME_OVERHEAD + rocev2.BTH_BYTES   # on the wire in front of a payload
# An ACK's bytes after the headers: its AETH and 4 more (the model has always counted the ICRC
# here as well as in FRAME_OVERHEAD; kept so that results stay comparable across versions).
ACK_PAYLOAD = rocev2.AETH_BYTES + rocev2.ICRC_BYTES
SPORT_MASK = rocev2.SPORT_MAX - rocev2.SPORT_MIN
assert SPORT_MASK & (SPORT_MASK + 1) == 0 and rocev2.SPORT_MIN & SPORT_MASK == 0, \
    "engine.cpp draws source ports as SPORT_MIN | (random & SPORT_MASK)"
PRELUDE = f"""#include <cstdint>
namespace mlsim {{
constexpr uint32_t WIRE_HEADER = {HEADER_BYTES};
constexpr uint32_t ACK_PAYLOAD = {ACK_PAYLOAD};
constexpr uint16_t SPORT_MIN = {rocev2.SPORT_MIN}, SPORT_MASK = {SPORT_MASK};
constexpr uint16_t ROCEV2_PORT = {rocev2.ROCEV2_PORT};
constexpr uint8_t UDP = {rocev2.UDP};
}}
"""
MCAST = 8                         # engine.cpp's Flags::MCAST: a raw send that is multicast
CONFIG = ("line_bps", "rto", "ecn_pmax", "cnp_interval", "dcqcn_g", "alpha_resume",
          "rate_decrease_interval", "rp_timer", "byte_counter", "rate_ai", "rate_hai", "min_rate",
          "buffer_bytes", "pfc_alpha", "headroom_bytes", "pfc_resume_bytes", "pfc_xoff_bytes",
          "ecn_kmin", "ecn_kmax", "window", "host_window", "reps_cache", "gbn_modes",
          "rto_max_backoff", "fast_recovery", "cc", "pfc")
COUNTERS = ("max_queue_bytes", "max_buffer_bytes", "max_ingress_bytes", "drop_injected",
            "min_rate_seen", "dropped", "drop_failed", "drop_queue", "drop_buffer",
            "drop_noroute", "marked", "timeouts", "retransmitted", "packets_sent", "duplicates",
            "mcast_copies", "agg_results", "out_of_order", "naks", "cnps", "rate_cuts", "pauses",
            "resumes")
FLOATS = ("max_ingress_bytes", "pfc_xoff_bytes", "line_bps", "rto", "ecn_pmax", "cnp_interval", "dcqcn_g",
          "alpha_resume", "rate_decrease_interval", "rp_timer", "byte_counter", "rate_ai",
          "rate_hai", "min_rate", "buffer_bytes", "pfc_alpha", "headroom_bytes",
          "pfc_resume_bytes", "max_buffer_bytes", "min_rate_seen")

CB3 = ctypes.CFUNCTYPE(None, c_int, c_int, c_int)
CB2 = ctypes.CFUNCTYPE(None, c_int, c_int)
CB1 = ctypes.CFUNCTYPE(None, c_int)
_P = ctypes.c_void_p
_IP = POINTER(c_int)
# name -> (result type, argument types after the engine)
SIGNATURES = {
    "mls_new": (_P, None), "mls_free": (None, []),
    "mls_set": (c_int, [ctypes.c_char_p, c_double]),
    "mls_get": (c_int, [ctypes.c_char_p, POINTER(c_double)]),
    "mls_on_arrive": (None, [CB3]), "mls_on_done": (None, [CB2]),
    "mls_on_timeout": (None, [CB1]), "mls_on_timer": (None, [CB1]), "mls_halt": (None, []),
    "mls_set_links": (None, [c_uint64, c_int64, c_uint32]),
    "mls_add_node": (c_int, [c_int, c_uint32]),
    "mls_connect": (None, [c_int, c_int, c_int, c_int]),
    "mls_set_group": (None, [c_int, c_int, _IP, c_int]),
    "mls_set_host_port": (None, [c_int, c_uint32, c_int]),
    "mls_add_pin": (None, [c_int, c_uint32, c_uint32, c_uint16, c_int]),
    "mls_fail_port": (None, [c_int, c_int]), "mls_seed": (None, [c_uint32]),
    "mls_set_salt": (None, [c_int, c_uint8]),
    "mls_lose_one": (None, [c_int, c_int, c_int64]),
    "mls_add_job": (c_int, []), "mls_add_step": (None, [c_int, c_int, c_uint64]),
    "mls_start_rank": (None, [c_int, c_int]), "mls_timer": (None, [c_double, c_int]),
    "mls_add_qp": (c_int, [c_int, c_int, c_int, c_int, c_uint64, c_uint32, c_uint16, c_int]),
    # the int64 arrays as addresses (ndarray.ctypes.data): no pointer object per call
    "mls_add_qps": (None, [c_int, c_int, c_int, c_int, _P, _P, c_uint32, _P, _P, c_int]),
    "mls_repath": (None, [c_int, c_uint16]), "mls_run": (c_double, [c_double]),
    "mls_events": (c_uint64, []), "mls_now_s": (c_double, []),
    "mls_rank_done": (c_double, [c_int, c_int]), "mls_qp_count": (c_int, []),
    "mls_qp_started": (c_double, [c_int]), "mls_qp_finished": (c_double, [c_int]),
    "mls_qp_received": (c_uint64, [c_int]),
    "mls_tx": (c_uint64, [c_int, c_int]), "mls_tx_data": (c_uint64, [c_int, c_int]),
    "mls_drops": (c_uint64, [c_int, c_int]), "mls_paused_ps": (c_uint64, [c_int, c_int]),
    "mls_qp_rate": (c_double, [c_int]),
    "mls_add_mcast": (None, [c_uint32, c_int, _IP, c_int]),
    "mls_raw_send": (None, [c_int, c_int, c_int, c_uint32, c_uint8, c_uint64, c_uint32,
                            c_double]),
    "mls_mcast_send": (None, [c_int, c_uint32, c_uint64, c_uint32, c_double]),
    "mls_host_rx_bytes": (c_uint64, [c_int]),
    "mls_set_agg": (None, [c_int, c_uint32, c_int, c_uint32]),
    "mls_agg_send": (None, [c_int, c_uint32, c_uint64, c_uint32, c_double]),
    "mls_last_rx_at": (c_double, []),
    "mls_route_of": (c_int, [c_int, c_uint32, c_uint32, c_uint8, c_uint16, c_uint16]),
}

_lib: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """The engine's shared object, built (or found in the cache) and loaded once per process."""
    global _lib
    if _lib is None:
        path = built(PRELUDE + SOURCE.read_text(), FLAGS, ".so", "sim/engine.cpp",
                     "mlfabric-sim", cxx=True)
        lib = ctypes.CDLL(str(path))
        for name, (res, args) in SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = None if args is None else [_P, *args]
        _lib = lib
    return _lib


def _ints(values, ctype):
    return (ctype * len(values))(*values)


class Engine:
    """One engine (its own clock, events and counters); `release` frees it."""

    def __init__(self) -> None:
        lib = library()
        object.__setattr__(self, "_lib", lib)
        object.__setattr__(self, "_e", lib.mls_new())
        object.__setattr__(self, "_callbacks", {})
        object.__setattr__(self, "_error", None)

    # ---- configuration and counters by name ------------------------------------------------
    def __getattr__(self, name: str):
        if name in CONFIG or name in COUNTERS:
            out = c_double()
            if self._lib.mls_get(self._e, name.encode(), ctypes.byref(out)) != 0:
                raise AttributeError(f"engine.cpp has no field {name}")
            v = out.value
            return bool(v) if name in ("cc", "pfc") else (v if name in FLOATS else int(v))
        raise AttributeError(name)

    def __setattr__(self, name: str, value) -> None:
        if name in CONFIG:
            if self._lib.mls_set(self._e, name.encode(), float(value)) != 0:
                raise AttributeError(f"engine.cpp cannot set {name}")
        elif name in ("on_arrive", "on_done", "on_timeout", "on_timer"):
            self._set_callback(name, value)
        else:
            raise AttributeError(f"the engine has no setting {name}")

    def _set_callback(self, name: str, fn) -> None:
        kind = {"on_arrive": CB3, "on_done": CB2, "on_timeout": CB1, "on_timer": CB1}[name]
        if fn is None:
            cb = ctypes.cast(None, kind)
        else:
            def guarded(*args, fn=fn):
                if self._error is not None:
                    return
                try:
                    fn(*args)
                except BaseException as exc:      # raised again by run(), after the engine halts
                    object.__setattr__(self, "_error", exc)
                    self._lib.mls_halt(self._e)
            cb = kind(guarded)
        self._callbacks[name] = cb              # ctypes callbacks must outlive their use in C
        getattr(self._lib, f"mls_{name}")(self._e, cb)

    # ---- building the fabric ---------------------------------------------------------------
    def set_links(self, bps: int, delay_ps: int, queue_packets: int) -> None:
        self._lib.mls_set_links(self._e, bps, delay_ps, queue_packets)

    def add_node(self, is_host: bool, ip: int) -> int:
        return self._lib.mls_add_node(self._e, int(is_host), ip)

    def connect(self, a: int, a_port: int, b: int, b_port: int) -> None:
        self._lib.mls_connect(self._e, a, a_port, b, b_port)

    def set_group(self, sw: int, dst_leaf: int, ports) -> None:
        self._lib.mls_set_group(self._e, sw, dst_leaf, _ints(ports, c_int), len(ports))

    def set_host_port(self, leaf: int, ip: int, port: int) -> None:
        self._lib.mls_set_host_port(self._e, leaf, ip, port)

    def add_pin(self, sw: int, src: int, dst: int, sport: int, port: int) -> None:
        self._lib.mls_add_pin(self._e, sw, src, dst, sport, port)

    def fail_port(self, node: int, port: int) -> None:
        self._lib.mls_fail_port(self._e, node, port)

    def lose_one(self, node: int, port: int, after: int) -> None:
        """The data packet sent onto (node, port) after `after` more is lost."""
        self._lib.mls_lose_one(self._e, node, port, after)

    def set_salt(self, sw: int, salt: int) -> None:
        """Switch `sw` hashes with `salt` (fabricmodel.hashing.switch_salt of its name)."""
        self._lib.mls_set_salt(self._e, sw, salt)

    def seed(self, s: int) -> None:
        self._lib.mls_seed(self._e, s)

    # ---- collectives -----------------------------------------------------------------------
    def add_job(self) -> int:
        return self._lib.mls_add_job(self._e)

    def add_step(self, job: int, rank: int, expect_bytes: int) -> None:
        self._lib.mls_add_step(self._e, job, rank, int(expect_bytes))

    def start_rank(self, job: int, rank: int) -> None:
        self._lib.mls_start_rank(self._e, job, rank)
        self._raise_pending()

    def timer(self, delay_s: float, tid: int) -> None:
        self._lib.mls_timer(self._e, delay_s, tid)

    def add_qp(self, job: int, src: int, dst: int, step: int, size: int, mtu: int, sport: int,
               mode: int) -> int:
        return self._lib.mls_add_qp(self._e, job, src, dst, step, int(size), mtu, sport, mode)

    def add_qps(self, job: int, src: int, step: int, n: int, dsts: np.ndarray,
                sizes: np.ndarray, mtu: int, sports: np.ndarray, modes: np.ndarray,
                nmodes: int) -> None:
        """add_qp for n QPs at once, from int64 arrays (C-contiguous: passed without a copy)."""
        self._lib.mls_add_qps(self._e, job, src, step, n, dsts.ctypes.data, sizes.ctypes.data,
                              mtu, sports.ctypes.data, modes.ctypes.data, nmodes)

    def repath(self, qp: int, sport: int) -> None:
        self._lib.mls_repath(self._e, qp, sport)

    def run(self, until_s: float) -> float:
        """Simulate until no event is left or `until_s` simulated seconds (< 0: no limit)."""
        t = self._lib.mls_run(self._e, until_s)
        self._raise_pending()
        return t

    def _raise_pending(self) -> None:
        err = self._error
        if err is not None:
            object.__setattr__(self, "_error", None)
            raise err

    def events(self) -> int:
        return self._lib.mls_events(self._e)

    def now_s(self) -> float:
        return self._lib.mls_now_s(self._e)

    def release(self) -> None:
        """Drops the callbacks (they hold the run that holds this engine: a cycle otherwise);
        the results stay readable until the engine itself is collected."""
        for name in list(self._callbacks):
            self._set_callback(name, None)
        self._callbacks.clear()

    def __del__(self) -> None:
        if getattr(self, "_e", None):
            self._lib.mls_free(self._e)
            object.__setattr__(self, "_e", None)

    # ---- results ---------------------------------------------------------------------------
    def rank_done(self, job: int, rank: int) -> float:
        return self._lib.mls_rank_done(self._e, job, rank)

    def qp_count(self) -> int:
        return self._lib.mls_qp_count(self._e)

    def qp_started(self, q: int) -> float:
        return self._lib.mls_qp_started(self._e, q)

    def qp_finished(self, q: int) -> float:
        return self._lib.mls_qp_finished(self._e, q)

    def qp_received(self, q: int) -> int:
        return self._lib.mls_qp_received(self._e, q)

    def tx(self, node: int, port: int) -> int:
        return self._lib.mls_tx(self._e, node, port)

    def tx_data(self, node: int, port: int) -> int:
        return self._lib.mls_tx_data(self._e, node, port)

    def drops(self, node: int, port: int) -> int:
        """Packets dropped at (node, port): sent onto its failed link or refused by its queue."""
        return self._lib.mls_drops(self._e, node, port)

    def paused_s(self, node: int, port: int) -> float:
        """Seconds (node, port) was paused by PFC in all (up to its last RESUME)."""
        return self._lib.mls_paused_ps(self._e, node, port) * 1e-12

    def qp_rate(self, q: int) -> float:
        """QP q's DCQCN rate now, bits per second."""
        return self._lib.mls_qp_rate(self._e, q)

    def route_of(self, sw: int, src: int, dst: int, proto: int, sport: int, dport: int) -> int:
        return self._lib.mls_route_of(self._e, sw, src, dst, proto, sport, dport)

    # ---- multicast and in-network aggregation ----------------------------------------------
    def add_mcast(self, group: int, sw: int, ports) -> None:
        self._lib.mls_add_mcast(self._e, group, sw, _ints(ports, c_int), len(ports))

    def raw_send(self, job: int, host: int, step: int, dst_ip: int, flags: int, size: int,
                 mtu: int, rate_bps: float) -> None:
        self._lib.mls_raw_send(self._e, job, host, step, dst_ip, flags, int(size), mtu, rate_bps)

    def mcast_send(self, host: int, group: int, size: int, mtu: int, at: float) -> None:
        self._lib.mls_mcast_send(self._e, host, group, int(size), mtu, at)

    def host_rx_bytes(self, host: int) -> int:
        return self._lib.mls_host_rx_bytes(self._e, host)

    def set_agg(self, sw: int, agg_ip: int, worker_ips, group: int) -> None:
        """Switch `sw` sums what the workers send to `agg_ip` and multicasts it to `group`."""
        self._lib.mls_set_agg(self._e, sw, agg_ip, len(worker_ips), group)

    def agg_send(self, host: int, agg_ip: int, size: int, mtu: int, at: float) -> None:
        self._lib.mls_agg_send(self._e, host, agg_ip, int(size), mtu, at)

    def last_rx_at(self) -> float:
        return self._lib.mls_last_rx_at(self._e)
