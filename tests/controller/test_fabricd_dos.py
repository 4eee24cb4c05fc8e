"""What one request may cost fabricd: a YAML "billion laughs" and a schema-valid topology of
16,383 leaves x 252 hosts are refused in under a second with fabricd's memory under +100 MB
while GetState keeps answering; a 100,000-character name is refused before it is persisted."""
import threading
import time

import grpc
import pytest
from test_fabricd_api import Daemon, free_port

from controller.proto import fabric_pb2 as api
from controller.proto import fabric_pb2_grpc

BOMB = "kind: leaf-spine\nleaves: 2\nspines: 2\nhosts_per_leaf: 2\nname: &a0 [x,x,x,x,x,x,x,x,x]\n" \
    + "".join(f"n{i}: &a{i} [*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1},"
              f"*a{i - 1},*a{i - 1},*a{i - 1}]\n" for i in range(1, 10))
HUGE = "kind: leaf-spine\nleaves: 16383\nspines: 2\nhosts_per_leaf: 252\n"
WIDE = "kind: leaf-spine\nleaves: 2\nspines: 2\nhosts_per_leaf: 2\nparallel_links: 100000000\n"


@pytest.fixture(scope="module")
def api_stub(tmp_path_factory):
    daemon = Daemon(tmp_path_factory.mktemp("dos"),
                    {n: f"127.0.0.1:{free_port()}" for n in ("leaf1", "leaf2", "spine1", "spine2")})
    server = daemon.start()
    with grpc.insecure_channel(server) as channel:
        yield fabric_pb2_grpc.FabricStub(channel), daemon
    daemon.stop()


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.parametrize("text", [BOMB, HUGE, WIDE], ids=["yaml-bomb", "16383x252", "parallel"])
def test_dos_topology_refused_fast_with_state_answering(api_stub, text):
    stub, daemon = api_stub
    before = rss_kb(daemon.proc.pid)
    result = {}

    def set_topology():
        start = time.monotonic()
        try:
            stub.SetTopology(api.SetTopologyRequest(yaml=text), timeout=60)
        except grpc.RpcError as err:
            result["code"], result["details"] = err.code(), err.details()
        result["seconds"] = time.monotonic() - start

    worker = threading.Thread(target=set_topology)
    worker.start()
    state_waits = []
    while not state_waits or worker.is_alive():      # GetState at least once meanwhile
        start = time.monotonic()
        stub.GetState(api.Empty(), timeout=60)
        state_waits.append(time.monotonic() - start)
    worker.join()
    assert result["code"] == grpc.StatusCode.INVALID_ARGUMENT, result
    assert result["seconds"] < 1.0, result
    assert max(state_waits) < 1.0
    assert rss_kb(daemon.proc.pid) - before < 100_000
    assert stub.GetTopology(api.Empty(), timeout=60).name == "leafspine-2x2"


def test_dos_long_names_refused_before_persisting(api_stub):
    stub, daemon = api_stub
    for call, request in (("CreateSlice", api.CreateSliceRequest(name="j" * 100_000, hosts=2)),
                          ("CreateMulticastGroup", api.CreateMulticastGroupRequest(
                              name="g", members=["h1", "h" * 100_000])),
                          ("SetLink", api.SetLinkRequest(link="x" * 1000))):
        with pytest.raises(grpc.RpcError) as err:
            getattr(stub, call)(request, timeout=60)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "at most 64" in err.value.details() and len(err.value.details()) < 200
    state = stub.GetState(api.Empty(), timeout=60)
    assert not state.slices and not state.groups
