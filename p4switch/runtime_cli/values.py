"""The runtime CLI's value syntax -> Thrift values: integers (any base Python's int(x, 0)
reads), and for 32-, 48- and 128-bit fields also dotted IPv4, MAC and IPv6 addresses; match
keys `v`, `v/len` (lpm), `v&&&mask` (ternary), `lo->hi` (range), all of the field's width."""
from __future__ import annotations

import ipaddress

from ..thrift.standard import BmMatchParam
from ..thrift.values import exact_param, lpm_param, range_param, ternary_param, valid_param


class InputError(ValueError):
    """A command argument that cannot be used; str() is the message printed."""


class KeyError_(InputError):
    """A bad match key ("Invalid match key: ...")."""


class DataError(InputError):
    """Bad action data ("Invalid runtime data: ...")."""


def _address(text: str, width: int) -> bytes | None:
    """The address forms; None when `text` is not one (then it is read as an integer)."""
    if width == 32 and "." in text:
        parts = text.split(".")
        try:
            octets = [int(p) for p in parts]
        except ValueError:
            raise InputError("Invalid IPv4 address") from None
        if len(parts) != 4 or not all(0 <= o < 256 for o in octets):
            raise InputError("Invalid IPv4 address")
        return bytes(octets)
    if width == 48 and ":" in text:
        parts = text.split(":")
        try:
            octets = [int(p, 16) for p in parts]
        except ValueError:
            raise InputError("Invalid MAC address") from None
        if len(parts) != 6 or not all(0 <= o < 256 for o in octets):
            raise InputError("Invalid MAC address")
        return bytes(octets)
    if width == 128 and ":" in text:
        try:
            return ipaddress.IPv6Address(text).packed
        except ValueError:
            raise InputError("Invalid IPv6 address") from None
    return None


def param_bytes(text: str, width: int) -> bytes:
    """One value of a `width`-bit field, big-endian in ceil(width/8) bytes."""
    address = _address(text, width)
    if address is not None:
        return address
    try:
        value = int(text, 0)
    except ValueError:
        raise InputError("Invalid input, could not cast to integer, try in hex with 0x "
                         "prefix") from None
    nbytes = (width + 7) // 8
    if value < 0 or value >= 1 << (8 * nbytes):
        raise InputError("Parameter is too large")
    return value.to_bytes(nbytes, "big")


def _field(text: str, width: int, error) -> bytes:
    try:
        return param_bytes(text, width)
    except InputError as exc:
        raise error(f"Error while parsing {text} - {exc}") from None


def action_data(action, args: list[str]) -> list[bytes]:
    return [_field(a, w, DataError) for a, (_, w) in zip(args, action.params, strict=True)]


def match_key(table, args: list[str]) -> list[BmMatchParam]:
    out = []
    for text, (_, kind, width) in zip(args, table.key, strict=True):
        if kind == "exact":
            out.append(exact_param(_field(text, width, KeyError_)))
        elif kind == "lpm":
            prefix, sep, length = text.partition("/")
            if not sep or "/" in length:
                raise KeyError_(f"Invalid LPM value {text}, use '/' to separate prefix and "
                                "length")
            try:
                plen = int(length)
            except ValueError:
                raise KeyError_(f"Invalid LPM value {text}, the prefix length is not an "
                                "integer") from None
            out.append(lpm_param(_field(prefix, width, KeyError_), plen))
        elif kind in ("ternary", "optional"):
            parts = text.split("&&&")
            if len(parts) != 2:
                raise KeyError_(f"Invalid ternary value {text}, use '&&&' to separate key and "
                                "mask")
            key, mask = (_field(p, width, KeyError_) for p in parts)
            out.append(ternary_param(key, mask))
        elif kind == "valid":
            try:
                valid = bool(int(text))
            except ValueError:
                raise KeyError_(f"Invalid valid value {text}, use 0 or 1") from None
            out.append(valid_param(valid))
        elif kind == "range":
            parts = text.split("->")
            if len(parts) != 2:
                raise KeyError_(f"Invalid range value {text}, use '->' to separate range start "
                                "and range end")
            start, end = (_field(p, width, KeyError_) for p in parts)
            if start > end:
                raise KeyError_(f"start is less than end in expression {text}")
            out.append(range_param(start, end))
        else:
            raise KeyError_(f"match kind '{kind}' is not supported")
    return out


def hexstr(data: bytes) -> str:
    return data.hex()


def colon_hex(data: bytes) -> str:
    return ":".join(f"{b:02x}" for b in data)


def port_map(values: list[str], what: str = "port") -> str:
    """['1', '3'] -> '1010': BMv2's port map string, port 0 last."""
    ports = []
    for v in values:
        try:
            p = int(v)
        except ValueError:
            raise InputError(f"'{v}' is not a valid {what} number") from None
        if p < 0:
            raise InputError(f"'{v}' is not a valid {what} number")
        ports.append(p)
    if len(set(ports)) != len(ports):
        dup = next(p for p in ports if ports.count(p) > 1)
        raise InputError(f"Found duplicate {what} number '{dup}'")
    if not ports:
        return ""
    return "".join("1" if p in ports else "0" for p in range(max(ports), -1, -1))
