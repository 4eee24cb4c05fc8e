"""Without root, kernel headers or a compilable source the loader says so in one sentence."""
import pytest

from ebpf import EbpfCompileError, EbpfUnavailable, Pin, program


def test_not_root(monkeypatch):
    monkeypatch.setattr(program.os, "geteuid", lambda: 1000)
    with pytest.raises(EbpfUnavailable, match=r"needs root: run this as root\.$"):
        Pin.load()


def test_missing_kernel_headers(monkeypatch):
    monkeypatch.setattr(program.os, "geteuid", lambda: 0)
    monkeypatch.setattr(program.platform, "release", lambda: "0.0.0-nowhere")
    with pytest.raises(EbpfUnavailable, match=r"kernel headers for 0\.0\.0-nowhere are "
                                               r"missing: run `make setup`"):
        Pin.load()


@pytest.mark.ebpf
def test_compile_error_names_the_source(monkeypatch, tmp_path):
    (tmp_path / "pin.c").write_text("int pin_egress(struct __sk_buff *skb) { oops }\n")
    monkeypatch.setattr(program, "HERE", tmp_path)
    with pytest.raises(EbpfCompileError, match="pin.c") as info:
        Pin.load()
    assert "oops" in str(info.value)  # the compiler's own words are kept for this case
