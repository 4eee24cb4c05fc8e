import pytest

from collectives.mcast import SAFETY, receive_timeout


def test_receive_timeout_is_the_allgathers_line_rate_time_times_the_safety_factor():
    # 8 ranks x 64 KiB at 2 Mbit/s: 2.1 s at line rate
    assert receive_timeout(65536, 8, 2.0, 0.1) == pytest.approx(SAFETY * 65536 * 8 * 8 / 2e6)
    assert receive_timeout(65536, 16, 2.0, 0.1) == pytest.approx(
        2 * receive_timeout(65536, 8, 2.0, 0.1))
    # a tiny Allgather on a fast link still waits a few RTOs
    assert receive_timeout(64, 4, 100_000.0, 0.02) == pytest.approx(SAFETY * 0.02)
    with pytest.raises(ValueError, match="positive"):
        receive_timeout(64, 4, 0.0, 0.02)
