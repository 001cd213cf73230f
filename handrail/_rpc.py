"""The one rule both services answer errors by, the bearer token both read, and the TLS of a client's channel.

Every error status a Handrail server sends carries, besides its code and message, a
``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer with one
``google.rpc.ErrorInfo``: a ``reason`` (UPPER_SNAKE_CASE, e.g. ``INVALID_ARGUMENT``,
``LEASE_HELD``, ``TOKEN_REVOKED``), the ``domain`` of the service (``authz.handrail`` or
``executor.handrail``) and ``metadata`` (``field`` for a bad request field). The codes
follow one rule (docs/errors.md):

=====================  ============================================================
``INVALID_ARGUMENT``   a request field is wrong; ``metadata["field"]`` names it
``UNAUTHENTICATED``    no bearer token, or one that names no live principal
``PERMISSION_DENIED``  the caller's role (or its grants) may not do this
``NOT_FOUND``          an unknown id, or one that belongs to another principal (alike)
``ALREADY_EXISTS``     a name that is taken
``FAILED_PRECONDITION`` the state forbids it now (a lease held, a session closed ...)
``RESOURCE_EXHAUSTED`` a watcher fell behind
``UNAVAILABLE``        only when the same call may succeed if retried
=====================  ============================================================

``INTERNAL`` and ``UNKNOWN`` are never an answer to any input.

This module is part of the shared base: it imports nothing of Handrail's.
"""

from __future__ import annotations

import errno
import inspect
import ipaddress
import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import grpc
from google.protobuf import any_pb2
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

__all__ = [
    "AUTHZ_DOMAIN",
    "AUTH_METADATA_KEY",
    "AUTH_SCHEME",
    "EXECUTOR_DOMAIN",
    "MALFORMED",
    "ErrorDetail",
    "add_service",
    "bearer_token",
    "cannot_listen",
    "error_detail",
    "error_status",
    "nul_field",
    "port_taken",
    "wire_text",
]

#: The metadata key every call carries its credentials in.
AUTH_METADATA_KEY = "authorization"
#: The scheme of the credentials; servers accept it in any case.
AUTH_SCHEME = "Bearer"
#: ``ErrorInfo.domain`` of the authorization sidecar's errors.
AUTHZ_DOMAIN = "authz.handrail"
#: ``ErrorInfo.domain`` of the executor's errors.
EXECUTOR_DOMAIN = "executor.handrail"

#: The longest message a status carries (the rest is cut): a message never carries a
#: request's whole payload back.
_MAX_MESSAGE = 1024


def bearer_token(metadata: Iterable[tuple[str, Any]] | None) -> str:
    """The token of an ``authorization: Bearer <token>`` entry (scheme in any case), or ``""``."""
    for key, value in metadata or ():
        if key == AUTH_METADATA_KEY and isinstance(value, str):
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() == AUTH_SCHEME.lower():
                return token.strip()
    return ""


def error_status(
    code: grpc.StatusCode, message: str, reason: str, domain: str, metadata: Mapping[str, str] | None = None
) -> grpc.Status:
    """A status for ``context.abort_with_status``: ``code``, ``message`` and one ErrorInfo."""
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 1] + "…"
    info = error_details_pb2.ErrorInfo(reason=reason, domain=domain, metadata=dict(metadata or {}))
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=[detail])
    return rpc_status.to_status(status)


@dataclass(frozen=True)
class ErrorDetail:
    """What a client reads off an error status.

    Attributes:
        code: the gRPC status code.
        message: the server's message (never prefixed with the code).
        reason: ``ErrorInfo.reason`` (the code's name when the server sent no details).
        domain: ``ErrorInfo.domain`` (empty without details).
        metadata: ``ErrorInfo.metadata``; ``field`` names a bad request field.
    """

    code: grpc.StatusCode
    message: str
    reason: str
    domain: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def field(self) -> str:
        """The request field the error is about, or ``""``."""
        return self.metadata.get("field", "")


def error_detail(exc: grpc.RpcError) -> ErrorDetail:
    """Read the code, message and ErrorInfo of a failed call (blocking or asyncio)."""
    code: grpc.StatusCode = exc.code()
    message: str = exc.details() or ""
    reason, domain, metadata = code.name, "", {}
    try:
        status = rpc_status.from_call(_TrailerView(exc))  # type: ignore[arg-type]
    except ValueError:  # details that do not match the code and message: ignore them
        status = None
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                reason, domain, metadata = info.reason or reason, info.domain, dict(info.metadata)
                break
    return ErrorDetail(code, message, reason, domain, metadata)


class _TrailerView:
    """What ``rpc_status.from_call`` reads, over a blocking or an asyncio error."""

    def __init__(self, exc: Any) -> None:
        self._exc = exc

    def trailing_metadata(self) -> Any:
        trailing = self._exc.trailing_metadata()
        return trailing if trailing is not None else ()

    def code(self) -> grpc.StatusCode:
        code: grpc.StatusCode = self._exc.code()
        return code

    def details(self) -> str:
        details: str = self._exc.details() or ""
        return details


def port_taken(listen: str) -> str:
    """``cannot_listen(listen)`` when another server listens on ``listen`` now, else ``""``.

    Asked before gRPC binds, so that a taken port is said in one line rather than in a
    gRPC core error log.
    """
    if listen.startswith(_SOCKET_FILES):
        return _socket_file_problem(listen)
    host, _, port_text = listen.rpartition(":")
    if not port_text.isdigit() or int(port_text) == 0:
        return ""
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC's own listener
            probe.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), int(port_text)))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return f"cannot listen on {listen}: the port is taken"
    return ""


def bound_address(listen: str, port: int) -> str:
    """Where a server that bound ``listen`` answers, for its "listening on" line: ``HOST:PORT``
    with the port it got (port 0 picks one), or a ``unix:`` path as it is (gRPC reports 1
    for a bound socket file, not a port)."""
    if listen.startswith(_SOCKET_FILES):
        return listen
    return f"{listen.rsplit(':', 1)[0]}:{port}"


#: The gRPC listen forms of a socket that is not an IP address and port.
_SOCKET_FILES = ("unix:", "unix-abstract:")


def _socket_file_problem(listen: str) -> str:
    """What is wrong with a ``unix:PATH`` or ``unix-abstract:NAME`` to listen on, or ``""``:
    no path at all (gRPC took ``unix:`` and said it listened), or a directory that is not
    there."""
    scheme = next(s for s in _SOCKET_FILES if listen.startswith(s))
    path = listen[len(scheme) :]
    if not path.strip("/"):
        return f"cannot listen on {listen}: no socket path after {scheme!r}"
    if scheme == "unix:":
        parent = os.path.dirname(os.path.abspath(path.removeprefix("//")))
        if not os.path.isdir(parent):
            return f"cannot listen on {listen}: there is no directory {parent}"
    return ""


def cannot_listen(listen: str) -> str:
    """One line saying why a server could not bind ``listen`` (``HOST:PORT``, or a socket file).

    gRPC says only that binding failed; a plain socket says why: the port is taken (by
    another server: SO_REUSEPORT is off, so a second server never shares it), or the
    address is not this machine's, or the port is privileged.
    """
    if listen.startswith(_SOCKET_FILES):
        return _socket_file_problem(listen) or f"cannot listen on {listen}"
    host, _, port_text = listen.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        return f"cannot listen on {listen}: not HOST:PORT"
    if not 0 <= port <= 65535:
        return f"cannot listen on {listen}: the port must be within 0..65535"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return f"cannot listen on {listen}: the port is taken"
        return f"cannot listen on {listen}: {exc.strerror or exc}"
    return f"cannot listen on {listen}"


class _Malformed:
    """What a request that does not parse decodes to (answered INVALID_ARGUMENT)."""


#: The request a handler is given when the bytes on the wire are not its message.
MALFORMED = _Malformed()


def _lenient(message_cls: Any) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        try:
            return message_cls.FromString(data)
        except (DecodeError, ValueError, RuntimeError):
            return MALFORMED

    return decode


def _malformed_status(domain: str, rpc: str) -> grpc.Status:
    return error_status(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"request: the bytes are not a {rpc} request message",
        "MALFORMED_REQUEST",
        domain,
        {"field": "request"},
    )


async def abort_aio(context: Any, status: grpc.Status) -> NoReturn:
    """End a ``grpc.aio`` call with ``status`` (``context.abort_with_status``, which raises).

    ``context`` is typed loosely: some versions of the aio stubs lack the method."""
    await context.abort_with_status(status)
    raise AssertionError("unreachable")  # abort_with_status raises


def _guarded(impl: Callable[..., Any], domain: str, rpc: str, *, aio: bool, streaming: bool) -> Callable[..., Any]:
    """``impl``, answering a request that did not parse with INVALID_ARGUMENT."""
    if aio and streaming:

        async def aio_stream(request: Any, context: Any) -> Any:
            if request is MALFORMED:
                await abort_aio(context, _malformed_status(domain, rpc))
            async for item in impl(request, context):
                yield item

        return aio_stream
    if aio:

        async def aio_unary(request: Any, context: Any) -> Any:
            if request is MALFORMED:
                await abort_aio(context, _malformed_status(domain, rpc))
            return await impl(request, context)

        return aio_unary
    if streaming:

        def stream(request: Any, context: Any) -> Any:
            if request is MALFORMED:
                context.abort_with_status(_malformed_status(domain, rpc))
            yield from impl(request, context)

        return stream

    def unary(request: Any, context: Any) -> Any:
        if request is MALFORMED:
            context.abort_with_status(_malformed_status(domain, rpc))
        return impl(request, context)

    return unary


def add_service(server: Any, servicer: Any, service: ServiceDescriptor, messages: Any, domain: str) -> None:
    """Serve every RPC of ``service`` with ``servicer``'s method of the same name.

    What the generated ``add_*Servicer_to_server`` does, except that bytes which do not
    parse as the request message are answered INVALID_ARGUMENT (``field`` "request"),
    where gRPC's own deserializer would answer INTERNAL. Works for ``grpc.server`` and
    ``grpc.aio.server`` alike (coroutine methods are served as such).
    """
    handlers = {}
    for method in service.methods:
        impl = getattr(servicer, method.name)
        aio = inspect.iscoroutinefunction(impl) or inspect.isasyncgenfunction(impl)
        request_cls = getattr(messages, method.input_type.name)
        response_cls = getattr(messages, method.output_type.name)
        factory = (
            grpc.unary_stream_rpc_method_handler if method.server_streaming else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = factory(
            _guarded(impl, domain, method.name, aio=aio, streaming=method.server_streaming),
            request_deserializer=_lenient(request_cls),
            response_serializer=response_cls.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))


_NOT_TEXT = re.compile("[\0\ud800-\udfff]")


def wire_text(value: str) -> str:
    """``value`` as text every wire and database here carries: an escaped surrogate pair
    joined into its character, a lone surrogate or a NUL made U+FFFD, as a decoder does.
    For text a page controls (a title, an accessible name, what a page script returns): a
    lone surrogate survives into Python from JavaScript and no UTF-8 encoder takes it (an
    observation holding one could not be sent), and the sidecar refuses a NUL."""
    if _NOT_TEXT.search(value) is None:
        return value
    joined = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return joined.replace("\0", "\ufffd")


def nul_field(message: Any, prefix: str = "") -> str:
    """The first string field of ``message`` (nested and repeated ones too) that holds a
    NUL (U+0000), as a dotted path (``grant.note``); ``""`` when none does. Protobuf
    strings may hold one; PostgreSQL's text cannot, and libpq's text parameters end at it."""
    for fd, value in message.ListFields():
        values = value if fd.is_repeated else (value,)
        if fd.type == fd.TYPE_STRING:
            if any("\0" in v for v in values):
                return f"{prefix}{fd.name}"
        elif fd.type == fd.TYPE_MESSAGE:
            for item in values:
                found = nul_field(item, f"{prefix}{fd.name}.")
                if found:
                    return found
    return ""


def channel_args(root_certificates: bytes | None, server_name: str | None) -> tuple[Any, list[tuple[str, str]]]:
    """``(credentials, options)`` of a channel: credentials None means plaintext. A
    ``server_name`` without ``root_certificates`` is a ValueError: a plaintext channel
    checks no name, and ignoring it would leave its caller believing one is checked."""
    if server_name and root_certificates is None:
        raise ValueError(f"server name {server_name!r} given without root certificates (TLS)")
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
    if root_certificates is None:
        return None, options
    return grpc.ssl_channel_credentials(root_certificates=root_certificates), options


def warn_if_plaintext(log: Any, who: str, listen: str) -> None:
    """Log (WARNING) that ``who`` serves plaintext on ``listen`` when other hosts may reach
    it (:func:`is_loopback`): bearer tokens then cross the network in clear."""
    if not is_loopback(listen):
        log.warning(
            "%s serves plaintext on %s, which other hosts may reach: bearer tokens cross the network "
            "in clear (serve TLS with --tls-cert and --tls-key)",
            who,
            listen,
        )


def is_loopback(listen: str) -> bool:
    """Whether ``HOST:PORT`` (as ``--listen`` takes it) binds loopback only: ``localhost``,
    an address of 127.0.0.0/8 or ``[::1]``, or a Unix socket. A wildcard (``0.0.0.0``,
    ``[::]``, no host) and any other name are not: they may reach other hosts."""
    if listen.startswith(("unix:", "unix-abstract:")):
        return True
    host = listen.rsplit(":", 1)[0].strip("[]") if ":" in listen else listen
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
