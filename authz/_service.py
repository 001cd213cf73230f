"""The gRPC face of the sidecar: a thin servicer over the :class:`Authorizer`.

Each handler authenticates the bearer token, decodes the request (:mod:`._wire`), calls the
authorizer and encodes the answer (:mod:`._wire_responses`); :class:`AuthzError` subclasses
become status codes in :func:`_rpc`, the server's one error edge.
:func:`serve` runs the servicer with health checking, reflection and optional TLS.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from handrail._dsn import is_pg_dsn, redact
from handrail._rpc import AUTHZ_DOMAIN, add_service, bound_address, cannot_listen, error_status, nul_field, port_taken
from handrail._rpc import bearer_token as bearer_token
from handrail.authz import _wire, _wire_responses
from handrail.authz._authorizer import Authorizer
from handrail.authz._deadline import CallDeadline
from handrail.authz._errors import (
    AlreadyExistsError,
    AuthzError,
    AuthzUnavailableError,
    DeadlineExceededError,
    InvalidArgumentError,
    LeaseConflictError,
    NotFoundError,
    PermissionDeniedError,
    PolicyError,
    StoreUnavailableError,
    UnauthenticatedError,
    WatchBehindError,
)
from handrail.authz._explain import when
from handrail.authz._models import DEFAULT_APPROVAL_TIMEOUT_MS, Principal
from handrail.authz._pg import PgStore
from handrail.authz._pg_db import describe
from handrail.authz._policies import PolicyEngine
from handrail.authz._reach import DEFAULT_CONSOLE_ORIGINS, ConsoleOrigins
from handrail.authz._sqlite import SqliteStore
from handrail.authz._store import AuthzStore
from handrail.authz._watch import SubscriptionClosed
from handrail.proto.authz.v1 import authz_pb2 as pb
from handrail.proto.authz.v1 import authz_pb2_grpc

log = logging.getLogger(__name__)

#: The full name of the service, as health checks and reflection know it.
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Authz"].full_name

# The status code of each error, most specific first (docs/errors.md). Whatever else an
# AuthzError says (a check that kept losing races) may succeed when retried.
_STATUS: tuple[tuple[type[AuthzError], grpc.StatusCode], ...] = (
    (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS),
    (LeaseConflictError, grpc.StatusCode.FAILED_PRECONDITION),
    (PolicyError, grpc.StatusCode.FAILED_PRECONDITION),
    (AuthzUnavailableError, grpc.StatusCode.UNAVAILABLE),
    (StoreUnavailableError, grpc.StatusCode.UNAVAILABLE),
    (WatchBehindError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (AuthzError, grpc.StatusCode.UNAVAILABLE),
)


def status_of(exc: AuthzError) -> grpc.Status:
    """The status (code, message, ErrorInfo) an error is answered with."""
    code = next(c for cls, c in _STATUS if isinstance(exc, cls))
    field = getattr(exc, "field", "")
    return error_status(code, str(exc), exc.reason, AUTHZ_DOMAIN, {"field": field} if field else None)


def _internal(method: str) -> grpc.Status:
    return error_status(grpc.StatusCode.INTERNAL, f"internal error in {method}", "INTERNAL", AUTHZ_DOMAIN)


#: Let clients ping every second, even between calls (a stopped replica is found by its
#: missing answers to pings; see ``_balance``).
KEEPALIVE_SERVER_OPTIONS = (
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 1000),
    ("grpc.http2.max_ping_strikes", 0),
)

#: How long a Watch handler waits for an event before looking whether the call is still on.
_WATCH_POLL_S = 1.0

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")
_Handler = Callable[[Any, _Req, grpc.ServicerContext], _Resp]


def _no_nul(request: Any) -> None:
    """Refuse a request with a NUL in a string field, naming it (see :func:`nul_field`)."""
    if field := nul_field(request):
        raise InvalidArgumentError(field, "must not contain NUL (U+0000)")


def _rpc(method: _Handler[_Req, _Resp]) -> _Handler[_Req, _Resp]:
    """Map errors raised by a handler to gRPC status codes (the RPC boundary)."""
    nul_checked = method.__name__ != "Check"  # validate_check refuses a NUL (the hot path)

    @functools.wraps(method)
    def wrapper(self: Any, request: _Req, context: grpc.ServicerContext) -> _Resp:
        try:
            with CallDeadline(context.time_remaining(), method.__name__):  # bounds its store calls
                if nul_checked:
                    _no_nul(request)
                return method(self, request, context)
        except AuthzError as exc:
            context.abort_with_status(status_of(exc))
        except Exception:  # a bug: logged with its traceback, answered without one
            log.exception("authz: %s failed", method.__name__)
            context.abort_with_status(_internal(method.__name__))
        raise AssertionError("unreachable")  # abort_with_status raises

    return wrapper


def _stream_rpc(
    method: _Handler[_Req, Iterator[_Resp]],
) -> _Handler[_Req, Iterator[_Resp]]:
    """:func:`_rpc` for a server-streaming handler (a generator)."""

    @functools.wraps(method)
    def wrapper(self: Any, request: _Req, context: grpc.ServicerContext) -> Iterator[_Resp]:
        try:
            _no_nul(request)
            yield from method(self, request, context)
        except AuthzError as exc:
            context.abort_with_status(status_of(exc))
        except Exception:  # a bug: logged with its traceback, answered without one
            log.exception("authz: %s failed", method.__name__)
            context.abort_with_status(_internal(method.__name__))

    return wrapper


class AuthzServicer(authz_pb2_grpc.AuthzServicer):
    """The ``handrail.authz.v1.Authz`` service over one :class:`Authorizer`."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authz = authorizer
        self.store = authorizer.store

    def _caller(self, context: grpc.ServicerContext) -> Principal:
        return self.authz.authenticate(bearer_token(context.invocation_metadata()))

    # --- checks -------------------------------------------------------------------------------

    @_rpc
    def Check(self, request: pb.CheckRequest, context: grpc.ServicerContext) -> pb.CheckResponse:
        token = bearer_token(context.invocation_metadata())
        try:
            check = _wire.check_request_from_pb(request)
        except InvalidArgumentError:
            self.authz.authenticate(token)  # an unknown caller hears UNAUTHENTICATED first
            raise
        try:  # the caller is authenticated in the check's own read (one round trip)
            decision = self.authz.check_as(token, check)
        except UnauthenticatedError:
            self.authz.log_unauthenticated(check)
            raise
        return _wire.decision_to_pb(decision)

    # --- grants -------------------------------------------------------------------------------

    @_rpc
    def Grant(self, request: pb.GrantRequest, context: grpc.ServicerContext) -> pb.GrantResponse:
        caller = self._caller(context)
        grant = self.authz.grant(caller, _wire.grant_from_pb(request.grant), request.ttl_ms)
        return _wire_responses.grant_response(grant, self.store.now_ms())

    @_rpc
    def Revoke(self, request: pb.RevokeRequest, context: grpc.ServicerContext) -> pb.RevokeResponse:
        caller = self._caller(context)
        grant = self.authz.revoke(caller, request.grant_id)
        return _wire_responses.revoke_response(grant, self.store.now_ms())

    @_rpc
    def ListGrants(self, request: pb.ListGrantsRequest, context: grpc.ServicerContext) -> pb.ListGrantsResponse:
        caller = self._caller(context)
        grants = self.authz.list_grants(caller, request.principal, request.target, request.include_inactive)
        return _wire_responses.list_grants_response(grants, self.store.now_ms())

    @_rpc
    def CloseTask(self, request: pb.CloseTaskRequest, context: grpc.ServicerContext) -> pb.CloseTaskResponse:
        caller = self._caller(context)
        grants = self.authz.close_task(caller, request.task_id)
        return _wire_responses.close_task_response(grants, self.store.now_ms())

    # --- leases -------------------------------------------------------------------------------

    @_rpc
    def Acquire(self, request: pb.AcquireRequest, context: grpc.ServicerContext) -> pb.LeaseResponse:
        caller = self._caller(context)
        lease = self.authz.acquire(caller, request.target, request.holder, request.ttl_ms)
        return _wire.lease_to_pb(lease)

    @_rpc
    def Renew(self, request: pb.RenewRequest, context: grpc.ServicerContext) -> pb.LeaseResponse:
        caller = self._caller(context)
        lease = self.authz.renew(caller, request.target, request.holder, request.epoch, request.ttl_ms)
        return _wire.lease_to_pb(lease)

    @_rpc
    def Release(self, request: pb.ReleaseRequest, context: grpc.ServicerContext) -> pb.LeaseResponse:
        caller = self._caller(context)
        lease = self.authz.release(caller, request.target, request.holder, request.epoch)
        return _wire.lease_to_pb(lease)

    @_rpc
    def TakeOver(self, request: pb.TakeOverRequest, context: grpc.ServicerContext) -> pb.LeaseResponse:
        caller = self._caller(context)
        lease = self.authz.take_over(caller, request.target, request.ttl_ms, request.note)
        return _wire.lease_to_pb(lease)

    @_rpc
    def HandBack(self, request: pb.HandBackRequest, context: grpc.ServicerContext) -> pb.LeaseResponse:
        caller = self._caller(context)
        lease = self.authz.hand_back(caller, request.target, request.epoch, request.next_holder)
        return _wire.lease_to_pb(lease)

    @_rpc
    def GetLease(self, request: pb.GetLeaseRequest, context: grpc.ServicerContext) -> pb.LeaseResponse:
        caller = self._caller(context)
        return _wire.lease_to_pb(self.authz.get_lease(caller, request.target))

    @_rpc
    def ReportActivity(self, request: pb.ReportActivityRequest, context: grpc.ServicerContext) -> pb.LeaseResponse:
        caller = self._caller(context)
        lease = self.authz.report_activity(caller, request.target, request.note, request.ttl_ms)
        return _wire.lease_to_pb(lease)

    @_rpc
    def ExpireLease(self, request: pb.ExpireLeaseRequest, context: grpc.ServicerContext) -> pb.LeaseResponse:
        caller = self._caller(context)
        return _wire.lease_to_pb(self.authz.expire_lease(caller, request.target))

    @_rpc
    def WhoAmI(self, request: pb.WhoAmIRequest, context: grpc.ServicerContext) -> pb.WhoAmIResponse:
        caller = self._caller(context)
        return _wire_responses.who_am_i_response(caller)

    # --- principals ---------------------------------------------------------------------------

    @_rpc
    def ListPrincipals(
        self, request: pb.ListPrincipalsRequest, context: grpc.ServicerContext
    ) -> pb.ListPrincipalsResponse:
        caller = self._caller(context)
        return _wire_responses.list_principals_response(self.authz.list_principals(caller), self.store.now_ms())

    @_rpc
    def RevokePrincipal(
        self, request: pb.RevokePrincipalRequest, context: grpc.ServicerContext
    ) -> pb.PrincipalResponse:
        caller = self._caller(context)
        info = self.authz.revoke_principal(caller, request.name)
        return _wire_responses.principal_response(info, self.store.now_ms())

    @_rpc
    def RotateToken(self, request: pb.RotateTokenRequest, context: grpc.ServicerContext) -> pb.PrincipalResponse:
        caller = self._caller(context)
        info, token = self.authz.rotate_token(caller, request.name, request.expires_at_ms)
        return _wire_responses.principal_response(info, self.store.now_ms(), token)

    # --- approvals ----------------------------------------------------------------------------

    @_rpc
    def Approve(self, request: pb.ApproveRequest, context: grpc.ServicerContext) -> pb.ApprovalResponse:
        caller = self._caller(context)
        approval = self.authz.approve(caller, request.approval_id, request.note)
        return _wire_responses.approval_response(approval)

    @_rpc
    def Deny(self, request: pb.DenyRequest, context: grpc.ServicerContext) -> pb.ApprovalResponse:
        caller = self._caller(context)
        approval = self.authz.deny(caller, request.approval_id, request.note)
        return _wire_responses.approval_response(approval)

    @_rpc
    def GetApproval(self, request: pb.GetApprovalRequest, context: grpc.ServicerContext) -> pb.ApprovalResponse:
        caller = self._caller(context)
        approval = self.authz.get_approval(caller, request.approval_id)
        return _wire_responses.approval_response(approval)

    @_rpc
    def ListApprovals(
        self, request: pb.ListApprovalsRequest, context: grpc.ServicerContext
    ) -> pb.ListApprovalsResponse:
        caller = self._caller(context)
        approvals = self.authz.list_approvals(
            caller,
            _wire.status_filter_from_pb(request.status),
            request.principal,
            request.target,
            request.limit,
        )
        return _wire_responses.list_approvals_response(approvals)

    # --- policies and the decision log --------------------------------------------------------

    @_rpc
    def ReloadPolicies(
        self, request: pb.ReloadPoliciesRequest, context: grpc.ServicerContext
    ) -> pb.ReloadPoliciesResponse:
        caller = self._caller(context)
        engines = self.authz.reload_policies(caller)
        return _wire_responses.reload_policies_response(
            engines[0].policy_ids,
            engines[1].policy_ids if len(engines) > 1 else (),
            self.store.now_ms(),
        )

    @_rpc
    def ExplainDecision(
        self, request: pb.ExplainDecisionRequest, context: grpc.ServicerContext
    ) -> pb.ExplainDecisionResponse:
        caller = self._caller(context)
        record, text = self.authz.explain(caller, request.decision_id)
        return _wire_responses.explain_decision_response(record, text)

    @_rpc
    def ListDecisions(
        self, request: pb.ListDecisionsRequest, context: grpc.ServicerContext
    ) -> pb.ListDecisionsResponse:
        caller = self._caller(context)
        records = self.authz.list_decisions(
            caller,
            request.principal,
            request.target,
            _wire.reason_filter_from_pb(request.reason),
            request.since_ms,
            request.limit,
        )
        return _wire_responses.list_decisions_response(records)

    # --- the operator console -----------------------------------------------------------------

    @_rpc
    def CheckHumanInput(self, request: pb.CheckRequest, context: grpc.ServicerContext) -> pb.CheckResponse:
        caller = self._caller(context)
        check = _wire.check_request_from_pb(request)
        return _wire.decision_to_pb(self.authz.check_human_input(caller, check))

    @_rpc
    def ListLeases(self, request: pb.ListLeasesRequest, context: grpc.ServicerContext) -> pb.ListLeasesResponse:
        caller = self._caller(context)
        return pb.ListLeasesResponse(leases=[_wire.lease_msg(lease) for lease in self.authz.list_leases(caller)])

    # --- Watch --------------------------------------------------------------------------------

    @_stream_rpc
    def Watch(self, request: pb.WatchRequest, context: grpc.ServicerContext) -> Iterator[pb.WatchEvent]:
        caller = self._caller(context)
        first, sub = self.authz.watch(caller, list(request.targets), request.since_seq)
        context.add_callback(sub.close)
        # Tell the watcher at once that it is subscribed (an executor stops polling then).
        context.send_initial_metadata(())
        try:
            for event in first:
                yield _wire.event_to_pb(event)
            while context.is_active():
                try:
                    got = sub.get(_WATCH_POLL_S)
                except SubscriptionClosed as exc:
                    if exc.overflowed:  # answered by _stream_rpc (an abort here would be taken for a bug)
                        raise WatchBehindError("watcher fell too far behind; watch again with since_seq") from None
                    return
                if got is not None:
                    yield _wire.event_to_pb(got)
        finally:
            sub.close()


class AuthzServer(grpc.Server):
    """A started gRPC server that also owns the authorizer, the store and the worker pool.

    It behaves as the :class:`grpc.Server` it wraps; :meth:`stop` also ends every Watch and
    closes the store once the server has terminated.

    Attributes:
        authorizer: the sidecar's behaviour (tests drive it directly).
        store: the store the servicer uses (tests read the decision log through it).
        port: the bound port.
    """

    def __init__(
        self,
        server: grpc.Server,
        authorizer: Authorizer,
        executor: ThreadPoolExecutor,
        port: int,
        lock_fd: int | None = None,
    ) -> None:
        self._server = server
        self._executor = executor
        self._lock_fd = lock_fd
        self.authorizer = authorizer
        self.store = authorizer.store
        self.port = port

    def reload_policies(self) -> bool:
        """Re-read the policies (SIGHUP); False, with the old set kept, when they are broken."""
        try:
            self.authorizer.reload_policies()
        except PolicyError:
            return False
        return True

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
        self.authorizer.close()  # ends every Watch stream first
        event = self._server.stop(grace)

        def close() -> None:
            event.wait()
            self._executor.shutdown(wait=True)
            self.store.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

        if grace is None:
            close()
        else:
            threading.Thread(target=close, name="authz-close", daemon=True).start()
        return event

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self._server.wait_for_termination(timeout)


def _lock_data_dir(data_dir: Path) -> int:
    """Hold ``authz.lock`` so that one sidecar at a time serves a data directory."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / "authz.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise RuntimeError(f"cannot use the data directory {data_dir}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise RuntimeError(
            f"another authz sidecar is serving {data_dir} (it holds {data_dir / 'authz.lock'})"
        ) from None
    return fd


def _read(value: str | Path | bytes) -> bytes:
    return value if isinstance(value, bytes) else Path(value).read_bytes()


def serve(
    data_dir: str | Path,
    listen: str = "127.0.0.1:7700",
    policies_dir: str | Path | None = None,
    *,
    clock: Callable[[], int] | None = None,
    max_workers: int = 32,
    durable_decisions: bool = False,
    shadow_policies_dir: str | Path | None = None,
    approval_timeout_ms: int = DEFAULT_APPROVAL_TIMEOUT_MS,
    tls_cert: str | Path | bytes | None = None,
    tls_key: str | Path | bytes | None = None,
    console_origins: Sequence[str] | None = None,
    store: str | None = None,
) -> tuple[AuthzServer, int]:
    """Load the policies, open the store and start the sidecar's gRPC server.

    Args:
        data_dir: the directory of ``authz.sqlite`` (created if missing). One sidecar at a
            time may serve it (``authz.lock``).
        listen: ``HOST:PORT`` to bind; port 0 picks a free one.
        policies_dir: the Cedar policies directory (default: the shipped policies).
        clock: the store's clock in unix ms (tests pass a fake); default the wall clock.
        max_workers: handler threads. Each open ``Watch`` holds one.
        durable_decisions: fsync every decision-log insert (see :class:`SqliteStore`).
        shadow_policies_dir: a second policy set evaluated on every check and logged as
            "would deny", never enforced.
        approval_timeout_ms: the deadline of an approval when neither grant nor policy sets one.
        tls_cert, tls_key: PEM certificate chain and private key (paths or bytes): serve TLS
            instead of plaintext.
        console_origins: the operator console's origins, which no agent may reach; None:
            ``$HANDRAIL_CONSOLE_ORIGIN`` (comma-separated) or :data:`DEFAULT_CONSOLE_ORIGINS`.
        store: ``postgresql://...``: serve from that database (any number of replicas may
            serve one database; ``data_dir`` is then not used); None: ``authz.sqlite`` in
            ``data_dir``.

    Returns:
        The started server (a :class:`grpc.Server`) and the port it bound.

    Raises:
        PolicyError: a policy file is broken (``FILE:LINE: message``).
        RuntimeError: the address cannot be bound, or the data directory is served already.
    """
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert and tls_key go together")
    if console_origins is None:
        env = os.environ.get("HANDRAIL_CONSOLE_ORIGIN", "")
        console_origins = [o for o in env.split(",") if o.strip()] or list(DEFAULT_CONSOLE_ORIGINS)
    consoles = ConsoleOrigins.parse(o.strip() for o in console_origins)
    engine = PolicyEngine.load(policies_dir)
    shadow = PolicyEngine.load(shadow_policies_dir) if shadow_policies_dir else None
    if store and not is_pg_dsn(store):
        raise ValueError(f"--store must be a postgresql:// URL, not {redact(store, store)!r}")
    opened: AuthzStore
    sqlite: SqliteStore | None = None
    lock_fd: int | None = None
    if store:
        opened = PgStore(store, clock=clock, durable_decisions=durable_decisions, pool_size=max(4, max_workers // 2))
        where = describe(store)
    else:
        lock_fd = _lock_data_dir(Path(data_dir))
        try:
            opened = sqlite = SqliteStore.in_dir(
                data_dir, clock=clock, durable_decisions=durable_decisions, journal=True
            )
        except BaseException:
            os.close(lock_fd)
            raise
        where = str(data_dir)
    authorizer = Authorizer(
        opened,
        engine,
        shadow=shadow,
        policies_dir=policies_dir,
        shadow_dir=shadow_policies_dir,
        approval_timeout_ms=approval_timeout_ms,
    )
    authorizer.console_origins = consoles
    executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="authz")
    # No SO_REUSEPORT: a second sidecar on the same port must fail, not share it. Clients
    # may ping every second (they find a stopped replica that way, see _balance).
    server = grpc.server(executor, options=[("grpc.so_reuseport", 0), *KEEPALIVE_SERVER_OPTIONS])
    add_service(server, AuthzServicer(authorizer), pb.DESCRIPTOR.services_by_name["Authz"], pb, AUTHZ_DOMAIN)

    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in (SERVICE_NAME, ""):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    try:
        taken = port_taken(listen)
        if taken:
            raise RuntimeError(taken)
        if tls_cert is not None and tls_key is not None:
            credentials = grpc.ssl_server_credentials([(_read(tls_key), _read(tls_cert))])
            port = server.add_secure_port(listen, credentials)
        else:
            port = server.add_insecure_port(listen)
    except (RuntimeError, OSError):
        executor.shutdown(wait=False)
        authorizer.close()
        opened.close()
        if lock_fd is not None:
            os.close(lock_fd)
        raise RuntimeError(cannot_listen(listen)) from None
    server.start()
    authorizer.start()
    if sqlite is not None:
        sqlite.start_checkpointer()
    log.info(
        "authz serving %s on %s since %s (%d policies%s)",
        where,
        bound_address(listen, port),
        when(opened.now_ms()),
        len(engine.policy_ids),
        f", {len(shadow.policy_ids)} shadow" if shadow else "",
    )
    return AuthzServer(server, authorizer, executor, port, lock_fd), port
