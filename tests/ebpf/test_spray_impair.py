"""spray and impair over many packets: ranges, uniformity, fractions within statistical bounds."""
import ctypes
import math
import os
from collections import Counter

import pytest
from ebpf_packets import (
    DST_IP,
    IP,
    UDP,
    Ether,
    Raw,
    icrc_valid,
    roce,
    sport_of,
    udp_checksum_valid,
)

pytestmark = pytest.mark.ebpf

N = 4000


def test_spray_uniform_in_range(spray):
    spray.configure(base=0xC000, count=8)
    frame = roce(0)
    ports = Counter(sport_of(spray.run(frame).data) for _ in range(N))
    assert set(ports) == set(range(0xC000, 0xC008))
    # Chi-square with 7 degrees of freedom. The 0.999 quantile (24.3) would fail one run in a
    # thousand with a uniform draw; 40.5 is the 1 - 1e-6 quantile, and a draw that is not
    # uniform (one port drawn twice, another never: chi2 = 1000) still fails.
    expected = N / 8
    chi2 = sum((n - expected) ** 2 / expected for n in ports.values())
    assert chi2 < 40.5, ports
    assert spray.counters() == (N, N * len(frame))


def test_spray_keeps_checksum_and_skips_other_traffic(spray):
    spray.configure(base=0xF000, count=0x1000)
    out = spray.run(roce(5)).data
    assert 0xF000 <= sport_of(out) <= 0xFFFF and udp_checksum_valid(out) and icrc_valid(out)
    other = bytes(Ether() / IP(dst=DST_IP) / UDP(sport=1234, dport=53) / Raw(b"x" * 30))
    assert spray.run(other).data == other
    assert spray.run(roce(5)[:40]).data == roce(5)[:40]


def test_spray_disabled_and_bad_range(spray):
    assert spray.run(roce(1)).data == roce(1)
    spray.configure(base=0xC000, count=4)
    with pytest.raises(ValueError, match="port count"):
        spray.configure(base=0xFFFF, count=2)
    assert spray.config() == (0xC000, 4)


def _bound(p: float, n: int) -> float:
    """Five standard deviations of a binomial count."""
    return 5 * math.sqrt(n * p * (1 - p)) + 1


def test_impair_drop_fraction(impair):
    impair.configure(drop=0.2, udp_dport=4791, seed=7)
    frame = roce(0)
    verdicts = [impair.run(frame, "egress").retval for _ in range(N)]
    dropped = verdicts.count(2)  # TC_ACT_SHOT
    assert abs(dropped - 0.2 * N) < _bound(0.2, N)
    assert verdicts.count(-1) == N - dropped
    assert impair.counters().dropped == dropped and impair.counters().matched == N


@pytest.fixture
def one_cpu():
    """A seeded stream is per CPU: stay on one CPU so that one stream is observed."""
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})
    yield
    os.sched_setaffinity(0, saved)


def test_impair_seed_is_deterministic(impair, one_cpu):
    frame = roce(0)
    runs = []
    for seed in (11, 11, 12):
        impair.configure(drop=0.5, seed=seed)
        runs.append([impair.run(frame, "ingress").retval for _ in range(200)])
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_impair_filter(impair):
    impair.configure(drop=1.0, udp_dport=4791)
    other_udp = bytes(Ether() / IP(dst=DST_IP) / UDP(dport=4792) / Raw(b"y" * 20))
    tcp = bytes(Ether() / IP(dst=DST_IP, proto=6) / Raw(b"z" * 20))
    assert impair.run(roce(0), "egress").retval == 2
    assert impair.run(other_udp, "egress").retval == -1
    assert impair.run(tcp, "egress").retval == -1
    impair.configure(drop=1.0, ip_proto=6)
    assert impair.run(tcp, "egress").retval == 2
    assert impair.run(roce(0), "egress").retval == -1
    impair.disable()
    assert impair.run(roce(0), "egress").retval == -1


def test_impair_bad_configuration(impair):
    impair.configure(drop=0.1, udp_dport=4791)
    before = bytes(impair.maps["impair_cfg"].get(ctypes.c_uint32(0)))
    with pytest.raises(ValueError, match="fraction"):
        impair.configure(drop=1.5)
    with pytest.raises(ValueError, match="UDP destination port"):
        impair.configure(udp_dport=4791, ip_proto=6)
    with pytest.raises(ValueError, match="seed"):
        impair.configure(seed=-1)
    assert bytes(impair.maps["impair_cfg"].get(ctypes.c_uint32(0))) == before


def test_impair_corrupts_one_bit_before_the_icrc(impair):
    """A corrupted RoCEv2 packet differs from what was sent in one bit of its last payload
    byte; its ICRC no longer holds, and nothing else changed (no checksum)."""
    frame = roce(0)
    impair.configure(corrupt=1.0, udp_dport=4791)
    out = impair.run(frame, "egress")
    assert out.retval == -1
    diff = [i for i, (a, b) in enumerate(zip(frame, out.data, strict=True)) if a != b]
    assert diff == [len(frame) - 5] and frame[-5] ^ out.data[-5] == 1
    assert icrc_valid(frame) and not icrc_valid(out.data)
    impair.configure(corrupt=0.25, udp_dport=4791, seed=3)
    impair.reset_counters()
    changed = sum(impair.run(frame, "egress").data != frame for _ in range(N))
    assert abs(changed - 0.25 * N) < _bound(0.25, N)
    assert impair.counters().corrupted == changed and impair.config().corrupt == 0.25
