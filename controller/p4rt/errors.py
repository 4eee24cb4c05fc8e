"""P4Runtime errors as Python exceptions, with the per-update details of a failed batch."""
from __future__ import annotations

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2 as pb


class P4RuntimeError(Exception):
    """A failed RPC: its gRPC status code and message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class WriteError(P4RuntimeError):
    """A Write whose batch failed; `errors` holds (update index, code name, message) per
    update that did not succeed (updates reported OK are left out)."""

    def __init__(self, code, message, errors: list[tuple[int, str, str]]) -> None:
        super().__init__(code, message)
        self.errors = errors

    def __str__(self) -> str:
        lines = [super().__str__()]
        lines += [f"  update {i}: {code}: {msg}" for i, code, msg in self.errors]
        return "\n".join(lines)


class NotPrimaryError(P4RuntimeError):
    """This client lost (or never won) primary arbitration for the switch."""


def from_rpc_error(err: grpc.RpcError) -> P4RuntimeError:
    code, message = err.code(), err.details() or ""
    per_update = _update_errors(err)
    if per_update is not None:
        return WriteError(code, message, per_update)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return NotPrimaryError(code, message)
    return P4RuntimeError(code, message)


def _update_errors(err: grpc.RpcError) -> list[tuple[int, str, str]] | None:
    for key, value in (err.trailing_metadata() or ()):
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        result = []
        for i, detail in enumerate(status.details):
            update_error = pb.Error()
            if detail.Unpack(update_error) and update_error.canonical_code != 0:
                code = grpc.StatusCode(_code_tuple(update_error.canonical_code)).name
                result.append((i, code, update_error.message))
        return result
    return None


def _code_tuple(number: int):
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code.value
    return grpc.StatusCode.UNKNOWN.value
