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


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.NOT_FOUND, message)


def already_exists(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, message)


def unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, message)


def permission_denied(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED, message)


def failed_precondition(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, message)


def out_of_range(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, message)


def resource_exhausted(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED, message)


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
