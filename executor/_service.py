"""The executor's gRPC service: decode, call the guarded core, encode, map errors.

Every error status is answered by the rule of :mod:`handrail._rpc` (docs/errors.md): its
code, a message that never repeats the code, and an ``ErrorInfo`` with the reason and the
bad field. An error the sidecar answered the executor with keeps its code and reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from handrail._errors import HandrailError
from handrail._rpc import (
    EXECUTOR_DOMAIN,
    abort_aio,
    add_service,
    cannot_listen,
    error_status,
    port_taken,
    warn_if_plaintext,
)
from handrail._rpc import bearer_token as _bearer
from handrail.authz import (
    AsyncAuthzClient,
    AuthzError,
    AuthzRpcError,
    AuthzUnavailableError,
)
from handrail.authz import InvalidArgumentError as AuthzInvalidArgumentError
from handrail.authz import PermissionDeniedError as AuthzPermissionDeniedError
from handrail.authz import UnauthenticatedError as AuthzUnauthenticatedError
from handrail.executor import _validate, _wire
from handrail.executor._backend import Backend
from handrail.executor._errors import (
    BackendError,
    ExecutorError,
    InvalidArgumentError,
    LeaseHeldError,
    NotFoundError,
    PermissionDeniedError,
    SessionClosedError,
    TargetGoneError,
    UnauthenticatedError,
)
from handrail.executor._faults import Fault
from handrail.executor._guard import GuardedExecutor, OpenSpec
from handrail.executor._lease import LeaseNews
from handrail.executor._models import BackendKind
from handrail.executor._service_console import ConsoleRpcs
from handrail.executor._session import Session
from handrail.executor.browser import BrowserHost
from handrail.proto.executor.v1 import executor_pb2 as pb
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc
from handrail.recorder import Ledger, open_ledger

log = logging.getLogger(__name__)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Executor"].full_name

_T = TypeVar("_T")
Context = grpc.aio.ServicerContext[Any, Any]

# The status code of each error, most specific first (docs/errors.md). A failing browser
# or window is a state (FAILED_PRECONDITION), not a reason to retry.
_STATUS: tuple[tuple[type[HandrailError], grpc.StatusCode], ...] = (
    (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (AuthzInvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (AuthzUnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (AuthzPermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (SessionClosedError, grpc.StatusCode.FAILED_PRECONDITION),
    (LeaseHeldError, grpc.StatusCode.FAILED_PRECONDITION),
    (BackendError, grpc.StatusCode.FAILED_PRECONDITION),
    (TargetGoneError, grpc.StatusCode.FAILED_PRECONDITION),  # for good: observing again will not help
    (AuthzUnavailableError, grpc.StatusCode.UNAVAILABLE),
    (AuthzRpcError, grpc.StatusCode.FAILED_PRECONDITION),
    (ExecutorError, grpc.StatusCode.FAILED_PRECONDITION),
    (HandrailError, grpc.StatusCode.UNAVAILABLE),  # the ledger could not write: retry
)


def status_of(exc: HandrailError) -> grpc.Status:
    """The status (code, message, ErrorInfo) an error is answered with."""
    code = next(c for cls, c in _STATUS if isinstance(exc, cls))
    message = exc.details if isinstance(exc, AuthzRpcError) else str(exc)
    field = getattr(exc, "field", "")
    return error_status(code, message, exc.reason, EXECUTOR_DOMAIN, {"field": field} if field else None)


def bearer_token(context: Context) -> str:
    """The bearer token of the call (the scheme in any case), or UNAUTHENTICATED."""
    token = _bearer(context.invocation_metadata())
    if not token:
        raise UnauthenticatedError("missing 'authorization: Bearer <token>' metadata", reason="TOKEN_MISSING")
    return token


class ExecutorServicer(ConsoleRpcs, pb_grpc.ExecutorServicer):
    """Thin: every RPC decodes, calls ``GuardedExecutor`` and encodes (the console's RPCs:
    ``ConsoleRpcs``)."""

    def __init__(self, core: GuardedExecutor) -> None:
        self._core = core

    def _token(self, context: Context) -> str:
        return bearer_token(context)

    async def _run(self, context: Context, call: Callable[[], Awaitable[_T]]) -> _T:
        try:
            return await call()
        except HandrailError as exc:
            await abort_aio(context, status_of(exc))
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception:  # a bug: logged with its traceback, answered without one
            log.exception("executor: a call failed unexpectedly")
            await abort_aio(
                context, error_status(grpc.StatusCode.INTERNAL, "internal error", "INTERNAL", EXECUTOR_DOMAIN)
            )

    async def _session(self, session_id: str, context: Context) -> Session:
        """The caller's session, its token checked with the sidecar first."""
        session, auth = await self._core.session_for(_validate.session_id(session_id), bearer_token(context))
        await auth
        return session

    async def _in_session(self, session_id: str, context: Context, work: Callable[[Session], Awaitable[_T]]) -> _T:
        """``work`` on the caller's session while its token is checked with the sidecar;
        a revoked or expired token fails the call all the same."""
        session, auth = await self._core.session_for(_validate.session_id(session_id), bearer_token(context))
        try:
            result = await work(session)
        except BaseException:
            auth.cancel()
            with contextlib.suppress(BaseException):
                await auth
            raise
        await auth
        return result

    async def OpenSession(self, request: pb.OpenSessionRequest, context: Context) -> pb.Session:
        async def call() -> pb.Session:
            token = bearer_token(context)
            target, agent, backend, start_url, desktop = _validate.open_session_args(request)
            info = await self._core.open_session(
                token=token,
                agent=agent,
                target=target,
                spec=OpenSpec(backend, target, start_url, desktop, request.session_ttl_ms),
            )
            return _wire.session_pb(info)

        return await self._run(context, call)

    async def Observe(self, request: pb.ObserveRequest, context: Context) -> pb.Observation:
        async def call() -> pb.Observation:
            options, diff = _validate.observe_args(request)

            async def observe(session: Session) -> pb.Observation:
                return _wire.observation_pb(await self._core.observe(session, options, diff=diff))

            return await self._in_session(request.session_id, context, observe)

        return await self._run(context, call)

    async def Act(self, request: pb.ActRequest, context: Context) -> pb.ActResponse:
        async def call() -> pb.ActResponse:
            _validate.session_id(request.session_id)
            spec = _validate.action_spec(request)

            async def act(session: Session) -> pb.ActResponse:
                _validate.check_for_backend(session.backend.kind, spec)
                return _wire.act_response_pb(await self._core.act(session, spec))

            return await self._in_session(request.session_id, context, act)

        return await self._run(context, call)

    async def ActBatch(self, request: pb.ActBatchRequest, context: Context) -> pb.ActBatchResponse:
        async def call() -> pb.ActBatchResponse:
            specs = _validate.batch_specs(request)
            session = await self._session(request.session_id, context)
            for i, spec in enumerate(specs):
                _validate.check_for_backend(session.backend.kind, spec, f"actions[{i}]")
            return _wire.batch_response_pb(await self._core.act_batch(session, specs))

        return await self._run(context, call)

    async def Reconcile(self, request: pb.ReconcileRequest, context: Context) -> pb.ReconcileResponse:
        async def call() -> pb.ReconcileResponse:
            action_id, verdict, evidence = _validate.reconcile_args(request)
            session = await self._session(request.session_id, context)
            result = await self._core.reconcile(session, action_id, verdict, evidence)
            return _wire.reconcile_response_pb(result)

        return await self._run(context, call)

    async def CloseSession(self, request: pb.CloseSessionRequest, context: Context) -> pb.CloseSessionResponse:
        async def call() -> pb.CloseSessionResponse:
            session = await self._session(request.session_id, context)
            await self._core.close_session(session)
            return _wire.close_session_response_pb()

        return await self._run(context, call)

    async def Attach(self, request: pb.AttachRequest, context: Context) -> AsyncIterator[pb.SessionEvent]:
        """Keep the session alive while the stream is open; its end closes the session."""

        async def call() -> Session:
            return await self._session(request.session_id, context)

        session = await self._run(context, call)
        queue: asyncio.Queue[object] = asyncio.Queue()
        session.events.append(queue)
        session.attached += 1
        closed_by_us = False
        try:
            yield pb.SessionEvent(
                kind=pb.SESSION_EVENT_ATTACHED,
                lease_epoch=session.fence.epoch,
                human_holds=session.fence.human_holds,
                message=f"attached to {session.session_id}; closing this stream closes the session",
            )
            while True:
                news = await queue.get()
                if news is None:
                    closed_by_us = True
                    yield pb.SessionEvent(kind=pb.SESSION_EVENT_CLOSED, message="the session was closed")
                    return
                if isinstance(news, LeaseNews):
                    yield pb.SessionEvent(
                        kind=pb.SESSION_EVENT_LEASE_CHANGED,
                        lease_epoch=news.epoch,
                        human_holds=news.human_holds,
                        message=news.message,
                    )
        finally:
            session.attached -= 1
            with contextlib.suppress(ValueError):
                session.events.remove(queue)
            session.touch()
            if not closed_by_us and not session.closed:
                # The agent's end of the stream went away: the agent is gone.
                with contextlib.suppress(HandrailError):
                    await asyncio.shield(self._core.close_session(session, reason="detached"))


@dataclass
class ExecutorServer:
    """A running executor: its gRPC server, its core and what they own."""

    server: grpc.aio.Server
    port: int
    core: GuardedExecutor
    host: BrowserHost
    authz: AsyncAuthzClient
    ledger: Ledger
    lock_fd: int | None = None

    async def stop(self, grace: float = 1.0) -> None:
        await self.server.stop(grace)
        await self.core.close()  # drains the ledger thread: every queued record written
        await self.host.close()
        await self.authz.close()
        self.ledger.close()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def lock_data_dir(data_dir: Path) -> int:
    """Hold ``executor.lock`` so that one executor at a time serves a data directory (and
    its ledger); raises ExecutorError in one line otherwise."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / "executor.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ExecutorError(f"cannot use the data directory {data_dir}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise ExecutorError(f"another executor is serving {data_dir} (it holds {data_dir / 'executor.lock'})") from None
    return fd


async def check_own_token(authz: AsyncAuthzClient, address: str) -> str:
    """The executor principal the token names, as the sidecar says; ExecutorError naming
    the cause (wrong token, wrong role, sidecar unreachable) otherwise."""
    try:
        principal, role = await authz.who_am_i()
    except AuthzUnavailableError:
        raise ExecutorError(f"cannot reach the authz sidecar at {address}") from None
    except AuthzUnauthenticatedError as exc:
        raise ExecutorError(
            f"the authz sidecar at {address} refuses this executor's token ({exc.reason}): check HANDRAIL_TOKEN"
        ) from None
    except AuthzError as exc:
        raise ExecutorError(f"the authz sidecar at {address} refused WhoAmI: {exc}") from None
    if role != "executor":
        raise ExecutorError(f"the token belongs to {principal!r}, a {role or 'principal of no role'}, not an executor")
    return principal


async def start_server(
    *,
    listen: str,
    authz_address: str,
    token: str,
    data_dir: Path,
    authz_root_certificates: bytes | None = None,
    authz_server_name: str | None = None,
    tls: tuple[bytes, bytes] | None = None,
    ledger: str | None = None,
    executor_id: str = "executor",
    chromium: str | None = None,
    lease_ttl_ms: int = 30_000,
    upload_dir: Path | None = None,
    playwright_clicks: bool = False,
    fault: Fault | None = None,
) -> ExecutorServer:
    """Check the token, lock the data dir, recover the ledger, start Chromium, the core and
    the gRPC server; return them running.

    ``ledger`` (a ``postgresql://`` URL) puts the ledger in that database, as the chain of
    ``executor_id`` (its head file in ``data_dir``); by default it is ``data_dir/ledger.sqlite``.
    ``authz_address`` may list several sidecar replicas (``a:7700,b:7700``);
    ``authz_root_certificates`` (PEM) make the executor speak TLS to them and trust those
    CAs, ``authz_server_name`` the name their certificates carry if not the address's host.
    ``tls`` (the PEM certificate chain and its key) makes the executor serve TLS (see
    :func:`serve_rpc`).

    Raises:
        ExecutorError: in one line: the token is wrong or not an executor's, the sidecar is
            unreachable, another executor serves the data dir, the port is taken ...
        HandrailError: the ledger cannot be opened (a read-only data dir, a database that
            does not answer ...).
    """
    authz = AsyncAuthzClient(
        authz_address, token, root_certificates=authz_root_certificates, server_name=authz_server_name
    )
    try:
        await check_own_token(authz, authz_address)
        lock_fd = lock_data_dir(data_dir)
    except BaseException:
        await authz.close()
        raise
    resources: list[Callable[[], Awaitable[None]]] = [authz.close]
    try:
        opened = open_ledger(ledger or data_dir / "ledger.sqlite", executor_id=executor_id, head_dir=data_dir)
        resources.append(_as_async(opened.close))
        host = BrowserHost(chromium, upload_dir, playwright_clicks=playwright_clicks)
        await host.start()
        resources.append(host.close)

        async def open_backend(spec: OpenSpec) -> Backend:
            if spec.backend is BackendKind.DESKTOP:
                from handrail.executor.desktop import open_desktop  # Xlib only when a desktop is asked for

                assert spec.desktop is not None  # checked by _validate
                target = spec.target

                async def person_at_desk(description: str) -> None:
                    # Input the executor did not cause: a person took the desk. The sidecar
                    # hands the lease to a human holder; the agent's queued writes are refused.
                    try:
                        await authz.report_activity(target, note=description)
                    except AuthzError as exc:
                        log.warning("could not report human activity on %s: %s", target, exc)

                return await open_desktop(spec.desktop, on_human_activity=person_at_desk)
            return await host.open_page()  # the loop judges and loads the start page

        core = GuardedExecutor(authz, opened, open_backend, lease_ttl_ms=lease_ttl_ms, fault=fault)
        resources.append(core.close)  # (also ends its ledger thread when the start fails)
        await core.start()
        server, port = await serve_rpc(core, listen, tls=tls)
    except BaseException:
        for close in reversed(resources):
            with contextlib.suppress(Exception):
                await close()
        os.close(lock_fd)
        raise
    return ExecutorServer(server, port, core, host, authz, opened, lock_fd)


async def serve_rpc(
    core: GuardedExecutor, listen: str, *, tls: tuple[bytes, bytes] | None = None
) -> tuple[grpc.aio.Server, int]:
    """Serve ``core`` over gRPC on ``listen``, with health checking and reflection; return the
    started server and the port it bound.

    ``tls`` (the PEM certificate chain and its private key) makes it serve TLS only: a
    plaintext client's handshake fails, so no call (and no bearer token) is read from it.
    Plaintext on an address other hosts may reach is logged as a warning: the agents'
    tokens would cross the network in clear.

    Raises:
        ExecutorError: the port is taken, or ``listen`` cannot be bound (or the
            certificate and key were refused).
    """
    # No SO_REUSEPORT: a second executor on the same port must fail, not share it.
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    add_service(server, ExecutorServicer(core), pb.DESCRIPTOR.services_by_name["Executor"], pb, EXECUTOR_DOMAIN)
    health_servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (
            SERVICE_NAME,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ),
        server,
    )
    taken = port_taken(listen)
    if taken:
        raise ExecutorError(taken)
    try:
        if tls is None:
            port = server.add_insecure_port(listen)
        else:
            cert, key = tls
            port = server.add_secure_port(listen, grpc.ssl_server_credentials([(key, cert)]))
    except RuntimeError:
        port = 0
    if port == 0:
        raise ExecutorError(cannot_listen(listen))
    if tls is None:
        warn_if_plaintext(log, "the executor", listen)
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, port


def _as_async(close: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        close()

    return run
