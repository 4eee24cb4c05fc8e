"""mininet/fabricd_proc.py: a fabric whose switches never come up fails within its deadline
and says which switches and what they logged (a test timeout would say nothing)."""
import socket
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet"))
from fabricd_proc import Fabricd  # noqa: E402


def _broken_switches(count: int) -> tuple[list[socket.socket], int]:
    """`count` listeners on consecutive 127.0.0.1 ports that close every connection at once
    (a switch process that is up but never answers P4Runtime), and the port base before
    them."""
    for base in range(21000, 40000, 100):
        socks = []
        try:
            for port in range(base + 1, base + count + 1):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
                s.listen()
        except OSError:
            for s in socks:
                s.close()
            continue
        for s in socks:
            threading.Thread(target=_close_each, args=(s,), daemon=True).start()
        return socks, base
    raise RuntimeError("no free ports")


def _close_each(listener: socket.socket) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        conn.close()


def test_switches_never_in_sync_fail_with_what_they_logged(tmp_path):
    socks, base = _broken_switches(4)
    topo = tmp_path / "topo.yaml"
    topo.write_text("name: broken\nkind: leaf-spine\nleaves: 2\nspines: 2\nhosts_per_leaf: 2\n"
                    f"grpc_port_base: {base}\n")
    (tmp_path / "leaf1.log").write_text("p4switch: started\np4switch: stuck on port 3\n")
    try:
        with pytest.raises(RuntimeError) as err:
            with Fabricd(topo, tmp_path, sync_timeout=2, switch_timeout=1):
                pass
    finally:
        for s in socks:
            s.close()
    text = str(err.value)
    assert "not in sync after 2 s" in text, text
    assert "spine2" in text, text
    assert "leaf1.log:\n  p4switch: started\n  p4switch: stuck on port 3" in text, text
    assert "fabricd.log:" in text
