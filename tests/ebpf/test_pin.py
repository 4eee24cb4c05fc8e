"""pin: a planner-written source port per queue pair; the ICRC stays valid."""
import pytest
from ebpf_packets import (
    DST_IP,
    QP,
    QP_SPORT,
    ack,
    icrc_valid,
    roce,
    sport_of,
    udp_checksum_field,
    udp_checksum_valid,
    without_sport,
)

pytestmark = pytest.mark.ebpf


def test_pinned_qp_leaves_on_its_port_with_valid_checksums(pin):
    assert pin.pin(DST_IP, QP, 0xD00D) == 0
    for payload in (0, 4, 64, 1024, 2048):  # BPF_PROG_TEST_RUN takes up to a page
        frame = roce(7, payload=payload)
        out = pin.run(frame)
        assert out.retval == -1
        assert sport_of(out.data) == 0xD00D
        assert without_sport(out.data)[:-4] == without_sport(frame)[:-4]  # only port and ICRC
        assert udp_checksum_valid(out.data) and icrc_valid(out.data), payload
        assert icrc_valid(frame) and out.data[-4:] != frame[-4:]
    entry = pin.get(DST_IP, QP)
    assert (entry.sport, entry.generation, entry.pkts) == (0xD00D, 0, 5)
    unpadded = roce(7, payload=1)  # not 4-byte padded: not RoCE, left alone
    assert pin.run(unpadded).data == unpadded


def test_zero_udp_checksum_stays_zero(pin):
    pin.pin(DST_IP, QP, 0xC001)
    out = pin.run(roce(1, checksum=False)).data
    assert udp_checksum_field(out) == 0 and sport_of(out) == 0xC001 and icrc_valid(out)


def test_repin_bumps_generation_and_counts_on(pin):
    pin.pin(DST_IP, QP, 0xC001)
    pin.run(roce(1))
    assert pin.pin(DST_IP, QP, 0xC001) == 0      # the same port again: not a re-pin
    assert pin.pin(DST_IP, QP, 0xC002) == 1
    assert sport_of(pin.run(roce(2)).data) == 0xC002
    assert pin.get(DST_IP, QP).pkts == 2


def test_other_qps_acks_and_unpinned_untouched(pin):
    pin.pin(DST_IP, QP, 0xC001)
    for frame in (roce(1, dqpn=QP + 1), roce(1, dst="10.0.0.9"), ack(0xC555, local_qp=QP)):
        assert pin.run(frame).data == frame
    assert pin.unpin(DST_IP, QP) and not pin.unpin(DST_IP, QP)
    assert pin.run(roce(1)).data == roce(1)
    assert sport_of(roce(1)) == QP_SPORT


def test_bad_pins_rejected(pin):
    with pytest.raises(ValueError, match="source port"):
        pin.pin(DST_IP, QP, 0x10000)
    with pytest.raises(ValueError, match="QP"):
        pin.pin(DST_IP, 1 << 24, 0xC000)
    with pytest.raises(ValueError, match="IPv4"):
        pin.pin("10.0.0.300", QP, 0xC000)
    assert pin.entries() == []
