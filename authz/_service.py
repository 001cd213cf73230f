"""The gRPC face of the sidecar: a thin servicer over the store, the policies and the core.

Each handler authenticates the bearer token, decodes the request (:mod:`._wire`), calls the
store and the core, and encodes the answer; :class:`AuthzError` subclasses become status
codes. :func:`serve` runs the servicer with health checking and reflection.
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from handrail.authz import _core, _wire
from handrail.authz._core import Decision, Principal, Reason
from handrail.authz._errors import (
    AlreadyExistsError,
    AuthzError,
    InvalidArgumentError,
    LeaseConflictError,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from handrail.authz._policies import PolicyEngine
from handrail.authz._store import Store
from handrail.proto.authz.v1 import authz_pb2 as pb
from handrail.proto.authz.v1 import authz_pb2_grpc

log = logging.getLogger(__name__)

#: The full name of the service, as health checks and reflection know it.
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Authz"].full_name

_STATUS: dict[type[AuthzError], grpc.StatusCode] = {
    InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,
    UnauthenticatedError: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDeniedError: grpc.StatusCode.PERMISSION_DENIED,
    NotFoundError: grpc.StatusCode.NOT_FOUND,
    AlreadyExistsError: grpc.StatusCode.ALREADY_EXISTS,
    LeaseConflictError: grpc.StatusCode.FAILED_PRECONDITION,
}

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")
_Handler = Callable[[Any, _Req, grpc.ServicerContext], _Resp]


def _rpc(method: _Handler[_Req, _Resp]) -> _Handler[_Req, _Resp]:
    """Map errors raised by a handler to gRPC status codes (the RPC boundary)."""

    @functools.wraps(method)
    def wrapper(self: Any, request: _Req, context: grpc.ServicerContext) -> _Resp:
        try:
            return method(self, request, context)
        except AuthzError as exc:
            code = _STATUS.get(type(exc), grpc.StatusCode.INTERNAL)
            context.abort(code, str(exc))
        except Exception:
            log.exception("authz: %s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method.__name__}")

    return wrapper


def bearer_token(metadata: Sequence[tuple[str, str | bytes]] | None) -> str:
    """The token of an ``authorization: Bearer <token>`` metadata entry, or ``""``."""
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
    return ""


class AuthzServicer(authz_pb2_grpc.AuthzServicer):
    """The ``handrail.authz.v1.Authz`` service over one store and one policy engine."""

    def __init__(self, store: Store, policies: PolicyEngine) -> None:
        self.store = store
        self.policies = policies

    def _caller(self, context: grpc.ServicerContext) -> Principal:
        token = bearer_token(context.invocation_metadata())
        caller = self.store.authenticate(token) if token else None
        if caller is None:
            raise UnauthenticatedError(
                "missing or unknown bearer token" if token else "missing bearer token"
            )
        return caller

    # --- checks -------------------------------------------------------------------------------

    @_rpc
    def Check(self, request: pb.CheckRequest, context: grpc.ServicerContext) -> pb.CheckResponse:
        token = bearer_token(context.invocation_metadata())
        if not token:
            raise UnauthenticatedError("missing bearer token")
        # One read transaction for the caller, the lease and the grants.
        caller, lease, grants, now = self.store.check_snapshot(
            token, request.principal, request.target
        )
        if caller is None:
            self._log_unauthenticated(request, now)
            raise UnauthenticatedError("unknown bearer token")
        check = _wire.check_request_from_pb(request)
        origin = _core.validate_check(check)
        _core.authorize_check(caller, check.principal)
        policy = self.policies.evaluate(check, origin)
        decision = _core.decide(
            check, origin, lease, grants, policy, now, decision_id=uuid.uuid4().hex
        )
        self.store.record_decision(caller.name, check, decision, now)
        return _wire.decision_to_pb(decision)

    def _log_unauthenticated(self, request: pb.CheckRequest, now: int) -> None:
        """Log a check with an unknown token as an UNAUTHENTICATED decision, if it is valid."""
        try:
            check = _wire.check_request_from_pb(request)
            _core.validate_check(check)
        except InvalidArgumentError:
            return
        decision = Decision(
            False, Reason.UNAUTHENTICATED.value, "unknown bearer token", uuid.uuid4().hex
        )
        self.store.record_decision("", check, decision, now)

    # --- grants -------------------------------------------------------------------------------

    @_rpc
    def Grant(self, request: pb.GrantRequest, context: grpc.ServicerContext) -> pb.GrantResponse:
        caller = self._caller(context)
        _core.authorize_manage(caller, "grant")
        grant = self.store.add_grant(_wire.grant_from_pb(request.grant), caller.name)
        log.info("grant %s by %s: %s", grant.grant_id, caller.name, grant)
        return pb.GrantResponse(grant=_wire.grant_to_pb(grant))

    @_rpc
    def Revoke(self, request: pb.RevokeRequest, context: grpc.ServicerContext) -> pb.RevokeResponse:
        caller = self._caller(context)
        _core.authorize_manage(caller, "revoke")
        grant = self.store.revoke_grant(request.grant_id)
        log.info("revoke %s by %s", grant.grant_id, caller.name)
        return pb.RevokeResponse(grant=_wire.grant_to_pb(grant))

    @_rpc
    def ListGrants(
        self, request: pb.ListGrantsRequest, context: grpc.ServicerContext
    ) -> pb.ListGrantsResponse:
        caller = self._caller(context)
        principal = request.principal
        if caller.role == "agent":  # an agent sees its own grants only
            if principal and principal != caller.name:
                raise PermissionDeniedError("role agent may only list its own grants")
            principal = caller.name
        grants = self.store.list_grants(principal, request.target, request.include_inactive)
        return pb.ListGrantsResponse(grants=[_wire.grant_to_pb(g) for g in grants])

    # --- leases -------------------------------------------------------------------------------

    @_rpc
    def Acquire(
        self, request: pb.AcquireRequest, context: grpc.ServicerContext
    ) -> pb.LeaseResponse:
        caller = self._caller(context)
        holder = _core.resolve_holder(caller, request.holder, "acquire a lease")
        lease = self.store.change_lease(
            request.target, lambda cur, now: _core.lease_acquire(cur, holder, request.ttl_ms, now)
        )
        return _wire.lease_to_pb(lease)

    @_rpc
    def Renew(self, request: pb.RenewRequest, context: grpc.ServicerContext) -> pb.LeaseResponse:
        caller = self._caller(context)
        holder = _core.resolve_holder(caller, request.holder, "renew a lease")
        lease = self.store.change_lease(
            request.target,
            lambda cur, now: _core.lease_renew(cur, holder, request.epoch, request.ttl_ms, now),
        )
        return _wire.lease_to_pb(lease)

    @_rpc
    def Release(
        self, request: pb.ReleaseRequest, context: grpc.ServicerContext
    ) -> pb.LeaseResponse:
        caller = self._caller(context)
        holder = _core.resolve_holder(caller, request.holder, "release a lease")
        lease = self.store.change_lease(
            request.target, lambda cur, now: _core.lease_release(cur, holder, request.epoch, now)
        )
        return _wire.lease_to_pb(lease)

    @_rpc
    def TakeOver(
        self, request: pb.TakeOverRequest, context: grpc.ServicerContext
    ) -> pb.LeaseResponse:
        caller = self._caller(context)
        _core.authorize_manage(caller, "take over")
        _core.check_text("note", request.note)
        lease = self.store.change_lease(
            request.target,
            lambda cur, now: _core.lease_take_over(cur, caller.name, request.ttl_ms, now),
        )
        log.info(
            "takeover of %s by %s (epoch %d): %s",
            lease.target,
            caller.name,
            lease.epoch,
            request.note,
        )
        return _wire.lease_to_pb(lease)

    @_rpc
    def HandBack(
        self, request: pb.HandBackRequest, context: grpc.ServicerContext
    ) -> pb.LeaseResponse:
        caller = self._caller(context)
        _core.authorize_manage(caller, "hand back")
        lease = self.store.change_lease(
            request.target,
            lambda cur, now: _core.lease_hand_back(cur, request.epoch, request.next_holder, now),
        )
        log.info("hand-back of %s by %s (epoch %d)", lease.target, caller.name, lease.epoch)
        return _wire.lease_to_pb(lease)

    @_rpc
    def GetLease(
        self, request: pb.GetLeaseRequest, context: grpc.ServicerContext
    ) -> pb.LeaseResponse:
        self._caller(context)
        return _wire.lease_to_pb(self.store.get_lease(request.target))

    @_rpc
    def WhoAmI(self, request: pb.WhoAmIRequest, context: grpc.ServicerContext) -> pb.WhoAmIResponse:
        caller = self._caller(context)
        return pb.WhoAmIResponse(principal=caller.name, role=_wire.role_to_pb(caller.role))


class AuthzServer(grpc.Server):
    """A started gRPC server that also owns the store and the worker pool.

    It behaves as the :class:`grpc.Server` it wraps; :meth:`stop` also closes the store once
    the server has terminated.

    Attributes:
        store: the store the servicer uses (tests read the decision log through it).
        port: the bound port.
    """

    def __init__(
        self, server: grpc.Server, store: Store, executor: ThreadPoolExecutor, port: int
    ) -> None:
        self._server = server
        self._executor = executor
        self.store = store
        self.port = port

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Any) -> None:
        self._server.add_generic_rpc_handlers(generic_rpc_handlers)

    def add_insecure_port(self, address: str) -> int:
        return self._server.add_insecure_port(address)

    def add_secure_port(self, address: str, server_credentials: grpc.ServerCredentials) -> int:
        return self._server.add_secure_port(address, server_credentials)

    def start(self) -> None:
        self._server.start()

    def stop(self, grace: float | None = None) -> threading.Event:
        """Stop serving (see :meth:`grpc.Server.stop`); close the store once terminated."""
        event = self._server.stop(grace)

        def close() -> None:
            event.wait()
            self._executor.shutdown(wait=True)
            self.store.close()

        if grace is None:
            close()
        else:
            threading.Thread(target=close, name="authz-close", daemon=True).start()
        return event

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self._server.wait_for_termination(timeout)


def serve(
    data_dir: str | Path,
    listen: str = "127.0.0.1:7700",
    policies_dir: str | Path | None = None,
    *,
    clock: Callable[[], int] | None = None,
    max_workers: int = 16,
    durable_decisions: bool = False,
) -> tuple[AuthzServer, int]:
    """Load the policies, open the store and start the sidecar's gRPC server.

    Args:
        data_dir: the directory of ``authz.sqlite`` (created if missing).
        listen: ``HOST:PORT`` to bind; port 0 picks a free one.
        policies_dir: the Cedar policies directory (default: the shipped policies).
        clock: the store's clock in unix ms (tests pass a fake); default the wall clock.
        max_workers: handler threads.
        durable_decisions: fsync every decision-log insert (see :class:`Store`).

    Returns:
        The started server (a :class:`grpc.Server`) and the port it bound.

    Raises:
        PolicyError: a policy file is broken (``FILE:LINE: message``).
        RuntimeError: the address cannot be bound.
    """
    engine = PolicyEngine.load(policies_dir)
    store = Store.in_dir(data_dir, clock=clock, durable_decisions=durable_decisions)
    executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="authz")
    # No SO_REUSEPORT: a second sidecar on the same port must fail, not share it.
    server = grpc.server(executor, options=[("grpc.so_reuseport", 0)])
    authz_pb2_grpc.add_AuthzServicer_to_server(  # type: ignore[no-untyped-call]
        AuthzServicer(store, engine), server
    )

    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in (SERVICE_NAME, ""):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    try:
        port = server.add_insecure_port(listen)
    except RuntimeError as exc:
        executor.shutdown(wait=False)
        store.close()
        raise RuntimeError(f"cannot listen on {listen}: {exc}") from None
    server.start()
    return AuthzServer(server, store, executor, port), port
