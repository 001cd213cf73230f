"""The clients' edge with gRPC: channels, call metadata, and the one mapping of gRPC errors.

:class:`~handrail.authz.AuthzClient` and :class:`~handrail.authz.AsyncAuthzClient` send
every call inside :class:`map_grpc_errors`, so a :class:`grpc.RpcError` never leaves them:
unavailability and deadlines become :class:`AuthzUnavailableError` (a caller fails closed),
any other status becomes an :class:`AuthzRpcError` that is also the error of its code
(:data:`~._errors.REMOTE_ERRORS`), carrying the ``ErrorInfo`` reason and field.
"""

from __future__ import annotations

from types import TracebackType

import grpc

from handrail._rpc import AUTH_METADATA_KEY, AUTH_SCHEME, error_detail
from handrail.authz._errors import REMOTE_ERRORS, AuthzError, AuthzRpcError, AuthzUnavailableError

_UNAVAILABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def map_grpc_errors(address: str) -> GrpcErrorMap:
    """A context manager that turns a :class:`grpc.RpcError` raised inside it into the authz
    error tree; ``address`` (the sidecar's) goes into the message of an unavailability."""
    return GrpcErrorMap(address)


class GrpcErrorMap:
    """What :func:`map_grpc_errors` returns (a class, not a generator: it wraps every call a
    client makes, and costs a fifth of ``contextlib.contextmanager``)."""

    __slots__ = ("address",)

    def __init__(self, address: str) -> None:
        self.address = address

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, grpc.RpcError):
            raise _authz_error(exc, self.address) from None


def _authz_error(exc: grpc.RpcError, address: str) -> AuthzError:
    detail = error_detail(exc)
    code = detail.code
    if code in _UNAVAILABLE:
        return AuthzUnavailableError(f"authz at {address} is unavailable ({code.name}): {detail.message}")
    cls = REMOTE_ERRORS.get(code.name, AuthzRpcError)
    return cls(code.name, detail.message, reason=detail.reason, metadata=dict(detail.metadata))


def is_cancelled(exc: AuthzError) -> bool:
    """Whether ``exc`` says the call was cancelled (a Watch its caller closed)."""
    return isinstance(exc, AuthzRpcError) and exc.code_name == grpc.StatusCode.CANCELLED.name


def metadata(token: str) -> tuple[tuple[str, str], ...]:
    """The call metadata that carries ``token``."""
    return ((AUTH_METADATA_KEY, f"{AUTH_SCHEME} {token}"),)
