"""Converting the values users give (dotted IPv4 addresses, ports, QPs, PSNs) into map fields,
with a precise error for anything out of range."""
from __future__ import annotations

import ipaddress
import socket
import struct


def ip_be(ip: str | int) -> int:
    """An IPv4 address as the integer whose in-memory bytes are the address in network order."""
    try:
        packed = ipaddress.IPv4Address(ip).packed
    except (ipaddress.AddressValueError, ValueError) as exc:
        raise ValueError(f"not an IPv4 address: {ip!r}") from exc
    return struct.unpack("=I", packed)[0]


def ip_str(be: int) -> str:
    return socket.inet_ntoa(struct.pack("=I", be))


def port_be(port: int) -> int:
    return socket.htons(port)


def check_range(name: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], not {value!r}")
    return value


def check_qp(qp: int) -> int:
    return check_range("QP number", qp, 0, 0xFFFFFF)


def check_port(port: int, name: str = "UDP port") -> int:
    return check_range(name, port, 1, 0xFFFF)
