"""BMv2's Thrift runtime server: the `standard`, `simple_pre`, `simple_pre_lag` and
`simple_switch` services multiplexed on one TCP port (binary protocol, buffered transport, as
simple_switch), bound to 127.0.0.1 unless told otherwise. One thread per connection, at most
MAX_CLIENTS of them (a further client is closed at once); strings and lists in a request are
bounded, so no request costs more than its bounded work."""
from __future__ import annotations

import socket
import threading

from thrift.protocol import TBinaryProtocol
from thrift.TMultiplexedProcessor import TMultiplexedProcessor
from thrift.transport import TSocket, TTransport

from .bridge import Bridge
from .externs import ExternCalls
from .idl import Processor
from .management import ManagementCalls
from .mirroring import SimpleSwitchCalls
from .pre import PreCalls
from .profiles import ProfileCalls
from .simple_pre import SIMPLE_PRE, SIMPLE_PRE_LAG
from .simple_switch import SIMPLE_SWITCH
from .standard import STANDARD
from .tables import TableCalls

MAX_CLIENTS = 32
MAX_STRING = 16 << 20          # a program JSON can be large; nothing else is
MAX_CONTAINER = 1 << 16


class StandardCalls(TableCalls, ProfileCalls, ExternCalls, ManagementCalls):
    def __init__(self, bridge: Bridge, thrift_port: int):
        self.bridge, self.thrift_port = bridge, thrift_port


def processor(bridge: Bridge, thrift_port: int) -> TMultiplexedProcessor:
    mux = TMultiplexedProcessor()
    pre = PreCalls(bridge)
    mux.registerProcessor("standard", Processor(STANDARD, StandardCalls(bridge, thrift_port)))
    mux.registerProcessor("simple_pre", Processor(SIMPLE_PRE, pre))
    mux.registerProcessor("simple_pre_lag", Processor(SIMPLE_PRE_LAG, pre))
    mux.registerProcessor("simple_switch", Processor(SIMPLE_SWITCH, SimpleSwitchCalls(bridge)))
    return mux


class ThriftServer:
    def __init__(self, sock: socket.socket, mux: TMultiplexedProcessor):
        self._sock, self._mux = sock, mux
        host, port = sock.getsockname()[:2]
        self.address = f"{host}:{port}"
        self.port = port
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS)
        self._closed = threading.Event()
        threading.Thread(target=self._accept_loop, daemon=True, name="thrift-accept").start()

    @classmethod
    def start(cls, service, host: str, port: int, device_id: int = 0):
        """Bind host:port (port 0: any free one) and serve `service`'s device; OSError if
        the address cannot be bound."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(16)
        except OSError:
            sock.close()
            raise
        bound = sock.getsockname()[1]
        return cls(sock, processor(Bridge(service, device_id), bound))

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                conn.close()           # full: refuse rather than queue without bound
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="thrift-client").start()

    def _serve(self, conn: socket.socket) -> None:
        client = TSocket.TSocket()
        client.setHandle(conn)
        trans = TTransport.TBufferedTransport(client)
        prot = TBinaryProtocol.TBinaryProtocol(trans, string_length_limit=MAX_STRING,
                                               container_length_limit=MAX_CONTAINER)
        try:
            while not self._closed.is_set():
                self._mux.process(prot, prot)
        except (TTransport.TTransportException, EOFError, OSError):
            pass                # the client went away
        except Exception:       # a malformed request: drop this client, keep serving
            pass
        finally:
            trans.close()
            self._slots.release()

    def close(self) -> None:
        self._closed.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
