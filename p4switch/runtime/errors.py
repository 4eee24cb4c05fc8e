"""P4Runtime errors: one exception type carrying a gRPC status code, and the encoding of a
Write batch's per-update errors as the spec wants them (UNKNOWN + p4.v1.Error details)."""
from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

_DETAILS_KEY = "grpc-status-details-bin"


class P4RuntimeError(Exception):
    """A request (or one update of a batch) that the server rejects with `code`."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _with(code: grpc.StatusCode):
    def error(message: str) -> P4RuntimeError:
        return P4RuntimeError(code, message)
    error.__name__ = code.name.lower()
    return error


# One constructor per status code the server answers with: invalid("...") and so on.
invalid = _with(grpc.StatusCode.INVALID_ARGUMENT)
not_found = _with(grpc.StatusCode.NOT_FOUND)
already_exists = _with(grpc.StatusCode.ALREADY_EXISTS)
unimplemented = _with(grpc.StatusCode.UNIMPLEMENTED)
permission_denied = _with(grpc.StatusCode.PERMISSION_DENIED)
failed_precondition = _with(grpc.StatusCode.FAILED_PRECONDITION)
out_of_range = _with(grpc.StatusCode.OUT_OF_RANGE)
resource_exhausted = _with(grpc.StatusCode.RESOURCE_EXHAUSTED)
internal = _with(grpc.StatusCode.INTERNAL)


def canonical_code(code: grpc.StatusCode) -> int:
    """google.rpc.Code number of a grpc.StatusCode."""
    return code.value[0]


# gRPC refuses a response whose metadata exceeds the client's limit (8 KiB by default) as
# RESOURCE_EXHAUSTED, losing every detail: the batch status stays well under it (it travels
# base64-encoded), and each message is cut to a readable length.
DETAILS_BUDGET = 4096
DETAIL_MESSAGE_LIMIT = 200
MESSAGE_LIMIT = 1024


def fit(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """`message`, cut to `limit` characters with the count of the rest (a request can make an
    error echo a megabyte)."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message) - limit} more characters)"


def batch_status(results: list[P4RuntimeError | None]) -> status_pb2.Status:
    """google.rpc.Status for a Write batch in which at least one update failed: code UNKNOWN,
    one p4.v1.Error per update in order (OK for those that succeeded), as many as fit in the
    metadata budget; the message counts the failures and the updates left unlisted."""
    failed = sum(r is not None for r in results)
    status = status_pb2.Status(code=code_pb2.UNKNOWN,
                               message=f"{failed} of {len(results)} updates failed")
    for result in results:
        error = p4runtime_pb2.Error(canonical_code=code_pb2.OK)
        if result is not None:
            error.canonical_code = canonical_code(result.code)
            error.message = fit(result.message, DETAIL_MESSAGE_LIMIT)
        detail = any_pb2.Any()
        detail.Pack(error)
        if status.ByteSize() + detail.ByteSize() + 4 > DETAILS_BUDGET:
            break
        status.details.append(detail)
    rest = len(results) - len(status.details)
    if rest:
        status.message += (f"; details of the first {len(status.details)} updates, the other "
                           f"{rest} not listed (gRPC's metadata limit)")
    return status


def abort_with_batch(context: grpc.ServicerContext, results: list[P4RuntimeError | None]):
    status = batch_status(results)
    context.set_trailing_metadata(((_DETAILS_KEY, status.SerializeToString()),))
    context.abort(grpc.StatusCode.UNKNOWN, status.message)
