"""fabricctl with no fabricd at its address: the gRPC status, and what to start."""
import socket
import subprocess
import sys


def test_unreachable_fabricd_says_what_to_start():
    with socket.socket() as s:          # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    out = subprocess.run([sys.executable, "-m", "controller.fabricctl", "--server", addr,
                          "--timeout", "5", "state"], capture_output=True, text=True)
    assert out.returncode != 0 and out.stdout == ""
    assert f"UNAVAILABLE ({addr})" in out.stderr
    assert "docker-compose -f docker/compose.yaml up -d" in out.stderr
    assert "fabricd --topology FILE" in out.stderr
