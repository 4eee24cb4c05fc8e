"""How the SwitchML baseline sizes its pool and its timer (collectives.switchml)."""
import pytest

from collectives import switchml


def test_pool_is_twice_the_bandwidth_delay_product_in_packets():
    packet_s = switchml.FRAME_BYTES * 8 / 2e6
    assert switchml.FRAME_BYTES == 198                   # 32 int32 values and every header
    want = 2 * (6 * packet_s + switchml.HOST_RTT_S) / packet_s
    assert want <= switchml.pool_slots(2.0) < want + 1
    # a faster link holds more packets in the same host time
    assert switchml.pool_slots(32.0) > switchml.pool_slots(2.0)
    assert switchml.pool_slots(2.0, path_links=2) < switchml.pool_slots(2.0)
    with pytest.raises(ValueError, match="positive"):
        switchml.pool_slots(0.0)


def test_timer_outlasts_every_pool_queued_in_one_port():
    slots = switchml.pool_slots(2.0)
    rto = switchml.pool_timeout(8, slots, 2.0)
    assert rto == pytest.approx(2 * 8 * slots * switchml.FRAME_BYTES * 8 / 2e6)
    # at 2 Mbit/s well below the RC transport's 2.25 s (twice a full 256-packet queue)
    assert 0.1 < rto < 0.5
    with pytest.raises(ValueError, match="positive"):
        switchml.pool_timeout(0, slots, 2.0)
