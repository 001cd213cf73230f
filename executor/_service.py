"""The executor's gRPC service: decode, call the guarded core, encode, map errors."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from handrail._errors import HandrailError
from handrail.authz import AsyncAuthzClient, AuthzError, AuthzRpcError, AuthzUnavailableError
from handrail.executor import _validate, _wire
from handrail.executor._backend import Backend
from handrail.executor._errors import (
    BackendError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    SessionClosedError,
    UnauthenticatedError,
)
from handrail.executor._faults import Fault
from handrail.executor._guard import GuardedExecutor, OpenSpec
from handrail.executor._models import BackendKind
from handrail.executor._service_console import ConsoleRpcs
from handrail.executor._session import Session
from handrail.executor.browser import BrowserHost
from handrail.proto.executor.v1 import executor_pb2 as pb
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc
from handrail.recorder import Ledger

log = logging.getLogger(__name__)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Executor"].full_name

_T = TypeVar("_T")
Context = grpc.aio.ServicerContext[Any, Any]

_STATUS = {
    InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,
    NotFoundError: grpc.StatusCode.NOT_FOUND,
    UnauthenticatedError: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDeniedError: grpc.StatusCode.PERMISSION_DENIED,
    SessionClosedError: grpc.StatusCode.FAILED_PRECONDITION,
    BackendError: grpc.StatusCode.UNAVAILABLE,
    AuthzUnavailableError: grpc.StatusCode.UNAVAILABLE,
}


def bearer_token(context: Context) -> str:
    """The bearer token of the call, or UNAUTHENTICATED."""
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            token = value[len("Bearer ") :].strip()
            if token:
                return token
    raise UnauthenticatedError("missing 'authorization: Bearer <token>' metadata")


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
        except AuthzRpcError as exc:
            code = getattr(grpc.StatusCode, exc.code_name, grpc.StatusCode.UNAVAILABLE)
            await context.abort(code, str(exc))
        except HandrailError as exc:
            code = _STATUS.get(type(exc), grpc.StatusCode.FAILED_PRECONDITION)
            await context.abort(code, str(exc))
        raise AssertionError("unreachable")  # context.abort raises

    def _session(self, session_id: str, context: Context) -> Session:
        return self._core.sessions.get(_validate.session_id(session_id), bearer_token(context))

    async def OpenSession(self, request: pb.OpenSessionRequest, context: Context) -> pb.Session:
        async def call() -> pb.Session:
            target, agent, backend, start_url, desktop = _validate.open_session_args(request)
            info = await self._core.open_session(
                token=bearer_token(context),
                agent=agent,
                target=target,
                spec=OpenSpec(backend, target, start_url, desktop),
            )
            return _wire.session_pb(info)

        return await self._run(context, call)

    async def Observe(self, request: pb.ObserveRequest, context: Context) -> pb.Observation:
        async def call() -> pb.Observation:
            options, diff = _validate.observe_args(request)
            session = self._session(request.session_id, context)
            obs = await self._core.observe(session, options, diff=diff)
            return _wire.observation_pb(obs)

        return await self._run(context, call)

    async def Act(self, request: pb.ActRequest, context: Context) -> pb.ActResponse:
        async def call() -> pb.ActResponse:
            _validate.session_id(request.session_id)
            spec = _validate.action_spec(request)
            session = self._session(request.session_id, context)
            _validate.check_for_backend(session.backend.kind, spec)
            return _wire.act_response_pb(await self._core.act(session, spec))

        return await self._run(context, call)

    async def ActBatch(self, request: pb.ActBatchRequest, context: Context) -> pb.ActBatchResponse:
        async def call() -> pb.ActBatchResponse:
            specs = _validate.batch_specs(request)
            session = self._session(request.session_id, context)
            for i, spec in enumerate(specs):
                _validate.check_for_backend(session.backend.kind, spec, f"actions[{i}]")
            return _wire.batch_response_pb(await self._core.act_batch(session, specs))

        return await self._run(context, call)

    async def Reconcile(self, request: pb.ReconcileRequest, context: Context) -> pb.ReconcileResponse:
        async def call() -> pb.ReconcileResponse:
            action_id, verdict, evidence = _validate.reconcile_args(request)
            session = self._session(request.session_id, context)
            result = await self._core.reconcile(session, action_id, verdict, evidence)
            return _wire.reconcile_response_pb(result)

        return await self._run(context, call)

    async def CloseSession(self, request: pb.CloseSessionRequest, context: Context) -> pb.CloseSessionResponse:
        async def call() -> pb.CloseSessionResponse:
            session = self._session(request.session_id, context)
            await self._core.close_session(session)
            return _wire.close_session_response_pb()

        return await self._run(context, call)


@dataclass
class ExecutorServer:
    """A running executor: its gRPC server, its core and what they own."""

    server: grpc.aio.Server
    port: int
    core: GuardedExecutor
    host: BrowserHost
    authz: AsyncAuthzClient
    ledger: Ledger

    async def stop(self, grace: float = 1.0) -> None:
        await self.server.stop(grace)
        await self.core.close()
        await self.host.close()
        await self.authz.close()
        self.ledger.close()


async def start_server(
    *,
    listen: str,
    authz_address: str,
    token: str,
    data_dir: Path,
    chromium: str | None = None,
    lease_ttl_ms: int = 30_000,
    upload_dir: Path | None = None,
    playwright_clicks: bool = False,
    fault: Fault | None = None,
) -> ExecutorServer:
    """Recover the ledger, start Chromium, the core and the gRPC server; return them running."""
    data_dir.mkdir(parents=True, exist_ok=True)
    ledger = Ledger(data_dir / "ledger.sqlite")
    host = BrowserHost(chromium, upload_dir, playwright_clicks=playwright_clicks)
    await host.start()
    authz = AsyncAuthzClient(authz_address, token)

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
        return await host.open_page(spec.start_url)

    core = GuardedExecutor(authz, ledger, open_backend, lease_ttl_ms=lease_ttl_ms, fault=fault)
    await core.start()
    server = grpc.aio.server()
    pb_grpc.add_ExecutorServicer_to_server(ExecutorServicer(core), server)  # type: ignore[no-untyped-call]
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
    port = server.add_insecure_port(listen)
    if port == 0:
        await host.close()
        raise BackendError(f"could not listen on {listen}")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return ExecutorServer(server, port, core, host, authz, ledger)
