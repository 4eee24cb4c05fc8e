"""Switch ports: Linux interfaces opened as AF_PACKET raw sockets. Frames the kernel reports
back as our own transmissions (PACKET_OUTGOING) are ignored; VLAN tags the kernel stripped are
put back; TCP/UDP checksums left for offload (CHECKSUM_PARTIAL, e.g. from a veth peer) are
completed, since the frame leaves through another interface that will not do it.

A link that goes down is not a port that is gone: the kernel reports ENETDOWN on the socket
(once, as its pending error, and on every send while the interface is set down) and binds it
again by itself when the link comes back up, so the port keeps its socket; only an interface
that no longer exists (deleted, or another one by the same name) is gone."""
from __future__ import annotations

import array
import contextlib
import errno
import os
import socket
import struct

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_AUXDATA = 8
PACKET_IGNORE_OUTGOING = 23               # Linux 4.20
TP_STATUS_CSUMNOTREADY = 0x8
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
_AUX = struct.Struct("=IIIHHHH")          # struct tpacket_auxdata
_AUX_SPACE = socket.CMSG_SPACE(_AUX.size)
MAX_FRAME = 65536
GONE_ERRNOS = {errno.ENETDOWN, errno.ENXIO, errno.ENODEV, errno.EBADF}


class PortGone(OSError):
    """The port's interface disappeared."""


class RawPort:
    def __init__(self, number: int, ifname: str):
        self.number, self.ifname = number, ifname
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            self.sock.bind((ifname, 0))
            ifindex = socket.if_nametoindex(ifname)
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            self.sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            self.sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            # the frames this switch sends out of the port are not handed back to it (each
            # would cost a clone, a queueing and a read to throw away); older kernels hand
            # them back and receive() drops them
            with contextlib.suppress(OSError):
                self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            _grow_buffers(self.sock, 4 << 20)
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.ifindex = socket.if_nametoindex(ifname)
        self.rx = self.tx = self.tx_errors = 0

    def present(self) -> bool:
        """The interface this socket is bound to still exists (a link down leaves it)."""
        try:
            return socket.if_nametoindex(self.ifname) == self.ifindex
        except OSError:
            return False

    def link_down(self, err: int) -> bool:
        """Whether socket error `err` only means that the link went down: the port stays."""
        return err == errno.ENETDOWN and self.present()

    def clear_error(self) -> None:
        """Reads the socket's pending error (poll() reports POLLERR until it is read); raises
        PortGone unless it only says that the link went down."""
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err and not self.link_down(err) or not self.present():
            raise PortGone(err, f"{self.ifname}: {os.strerror(err) if err else 'socket error'}")

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self, limit: int = 64) -> list[bytes]:
        """Up to `limit` frames that are waiting; raises PortGone if the interface vanished."""
        frames = []
        for _ in range(limit):
            try:
                data, anc, _flags, addr = self.sock.recvmsg(MAX_FRAME, _AUX_SPACE)
            except BlockingIOError:
                break
            except OSError as exc:
                if self.link_down(exc.errno):
                    break                # nothing comes in until the link is back
                if exc.errno in GONE_ERRNOS:
                    raise PortGone(exc.errno, f"{self.ifname}: {exc.strerror}") from exc
                raise
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            for level, kind, value in anc:
                if level == SOL_PACKET and kind == PACKET_AUXDATA:
                    data = _fix_frame(data, *_AUX.unpack_from(value))
            frames.append(data)
        self.rx += len(frames)
        return frames

    def send(self, frame: bytes) -> None:
        try:
            self.sock.send(frame)
            self.tx += 1
        except BlockingIOError:
            self.tx_errors += 1          # socket buffer full: the frame is lost, as on a wire
        except OSError as exc:
            self.tx_errors += 1
            if self.link_down(exc.errno):
                return                   # lost, as on a wire that is down
            if exc.errno in GONE_ERRNOS:
                raise PortGone(exc.errno, f"{self.ifname}: {exc.strerror}") from exc
            if exc.errno not in (errno.EMSGSIZE, errno.ENOBUFS):
                raise

    def close(self) -> None:
        self.sock.close()


def _grow_buffers(sock: socket.socket, size: int) -> None:
    """Room for bursts: the *FORCE options (root) go past net.core.[rw]mem_max."""
    for force, plain in ((33, socket.SO_RCVBUF), (32, socket.SO_SNDBUF)):  # SO_*BUFFORCE
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
        except PermissionError:
            sock.setsockopt(socket.SOL_SOCKET, plain, size)


def _fix_frame(data: bytes, status, _len, _snaplen, _mac, _net, tci, tpid) -> bytes:
    if status & TP_STATUS_VLAN_VALID:
        tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
        data = data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    if status & TP_STATUS_CSUMNOTREADY:
        data = complete_l4_checksum(data)
    return data


def complete_l4_checksum(frame: bytes) -> bytes:
    """Finish a TCP/UDP checksum whose field holds only the pseudo-header sum (the kernel's
    CHECKSUM_PARTIAL state): the final value is the complement of the sum over the L4 bytes."""
    off = 12
    ethertype = int.from_bytes(frame[off:off + 2], "big")
    while ethertype in (0x8100, 0x88A8) and len(frame) >= off + 6:
        off += 4
        ethertype = int.from_bytes(frame[off:off + 2], "big")
    l3 = off + 2
    if ethertype == 0x0800 and len(frame) >= l3 + 20:
        proto, l4 = frame[l3 + 9], l3 + (frame[l3] & 0x0F) * 4
        end = l3 + int.from_bytes(frame[l3 + 2:l3 + 4], "big")
    elif ethertype == 0x86DD and len(frame) >= l3 + 40:
        proto, l4 = frame[l3 + 6], l3 + 40
        end = l4 + int.from_bytes(frame[l3 + 4:l3 + 6], "big")
    else:
        return frame
    field = {6: 16, 17: 6}.get(proto)
    if field is None or end > len(frame) or l4 + field + 2 > end:
        return frame
    csum = (~_ones_sum(frame[l4:end])) & 0xFFFF
    if proto == 17 and csum == 0:
        csum = 0xFFFF
    return frame[:l4 + field] + csum.to_bytes(2, "big") + frame[l4 + field + 2:]


def _ones_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    words = array.array("H", data)
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    # Summed in host order; the one's complement sum is byte-order independent up to a swap.
    return socket.ntohs(total) if socket.htons(1) != 1 else total


def open_ports(interfaces: dict[int, str]) -> dict[int, RawPort]:
    """A RawPort per number (both device kinds open their ports here); if one interface
    cannot be opened, the ports opened so far are closed again before the error goes on."""
    ports: dict[int, RawPort] = {}
    try:
        for number, ifname in interfaces.items():
            ports[number] = RawPort(number, ifname)
    except OSError:
        for port in ports.values():
            port.close()
        raise
    return ports
