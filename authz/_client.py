"""The blocking client of the sidecar, :class:`AuthzClient`; its asyncio twin is in
:mod:`._async_client`.

Both take the sidecar's address and the caller's bearer token, speak plain types
(:class:`Decision`, :class:`LeaseInfo`, :class:`GrantInfo`, lowercase verb strings), and raise
:class:`AuthzUnavailableError` when the sidecar is unreachable or too slow, and
:class:`AuthzRpcError` for any other error status. Each method only chooses its call from
:mod:`._wire_calls` (which builds the request and reads the response); gRPC errors become
authz errors in :func:`._channel.map_grpc_errors`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc

from handrail._rpc import channel_args
from handrail.authz import _wire_calls as calls
from handrail.authz._balance import KEEPALIVE_OPTIONS, Attempts, Replicas, call_timeout
from handrail.authz._channel import is_cancelled, map_grpc_errors, metadata
from handrail.authz._errors import AuthzError, AuthzUnavailableError
from handrail.authz._models import (
    ApprovalInfo,
    Decision,
    DecisionRecord,
    ElementContext,
    GrantInfo,
    LeaseInfo,
    PrincipalInfo,
    WatchEventInfo,
)
from handrail.authz._wire import event_from_pb
from handrail.proto.authz.v1 import authz_pb2_grpc

_T = TypeVar("_T")

#: A ``since_seq`` past every sequence number: the replica starts the stream with the
#: current lease of each target (change ``resync``).
RESYNC_SEQ = 2**63 - 1


class WatchStream(Iterator[WatchEventInfo]):
    """The events of one ``Watch`` call; iterate it, close it from any thread.

    With several replicas, a stream whose replica goes away continues on another one from
    the last event it delivered (``since_seq``; replicas over one PostgreSQL store share
    the numbers), so nothing is lost; one that had delivered nothing starts there with the
    current lease of each target (change ``resync``). It raises only when no replica takes it.
    """

    def __init__(self, client: AuthzClient, targets: Iterable[str], since_seq: int) -> None:
        self._client = client
        self._targets = tuple(targets)
        self._last_seq = since_seq
        self._closed = False
        self._moved = False
        self._index, self._call = client._open_watch(self._targets, since_seq)

    @property
    def _address(self) -> str:
        return self._client._replicas.addresses[self._index]

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> WatchEventInfo:
        replicas = self._client._replicas
        failovers = 0
        while True:
            try:
                with map_grpc_errors(self._address):
                    msg = next(self._call)
            except AuthzError as exc:
                if self._closed or is_cancelled(exc):
                    raise StopIteration from None
                if not isinstance(exc, AuthzUnavailableError) or len(replicas) == 1 or failovers >= len(replicas):
                    raise
                replicas.failed(self._index)
                failovers += 1
                # Before any event the stream has no number to resume from: 0 ("from now")
                # would drop what changed meanwhile; a number past any asks for a resync.
                since = self._last_seq or RESYNC_SEQ
                self._index, self._call = self._client._open_watch(self._targets, since)
                self._moved = True  # replicas of one store share the numbers
                if self._closed:
                    self._call.cancel()
                continue
            event = event_from_pb(msg)
            if self._moved and event.change != "resync" and event.seq <= self._last_seq:
                continue  # seen already: the replica taken over from was ahead of this one
            self._last_seq = max(self._last_seq, event.seq)
            return event

    def close(self) -> None:
        """Cancel the call; a blocked iteration ends with StopIteration."""
        self._closed = True
        self._call.cancel()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AuthzClient:
    """A blocking client of the sidecar.

    Args:
        address: ``HOST:PORT`` of the sidecar, or of its replicas: ``"a:7700,b:7700"`` or a
            list. Calls are balanced across replicas and fail over (see :mod:`._balance`).
        token: the caller's bearer token.
        timeout_s: the deadline of each call, in seconds (however many replicas it tries).
        root_certificates: PEM CA certificates: speak TLS and trust these (None: plaintext).
        server_name: the name to expect in the server's certificate, when it is not the host
            of ``address``.
    """

    def __init__(
        self,
        address: str | Sequence[str],
        token: str,
        timeout_s: float = 2.0,
        *,
        root_certificates: bytes | None = None,
        server_name: str | None = None,
    ) -> None:
        self._token = token
        self._timeout = call_timeout(timeout_s)
        credentials, base_options = channel_args(root_certificates, server_name)
        options: list[tuple[str, Any]] = [*base_options, *KEEPALIVE_OPTIONS]

        def connect(target: str) -> grpc.Channel:
            if credentials is None:
                return grpc.insecure_channel(target, options=options)
            return grpc.secure_channel(target, credentials, options=options)

        self._replicas = Replicas(address, connect)
        self.address = ",".join(self._replicas.addresses)
        self._stubs = [authz_pb2_grpc.AuthzStub(ch) for ch in self._replicas.channels]  # type: ignore[no-untyped-call]

    def _send(self, call: calls.Call[_T], token: str | None = None) -> _T:
        attempts = Attempts(self._replicas, call.rpc, self._timeout)
        for index, timeout in attempts:
            try:
                response = getattr(self._stubs[index], call.rpc)(
                    call.request,
                    metadata=metadata(self._token if token is None else token),
                    timeout=timeout,
                )
            except grpc.RpcError as exc:
                attempts.failed(index, exc)
                continue
            self._replicas.answered(index)
            return call.decode(response)
        raise attempts.exhausted()

    def _open_watch(self, targets: tuple[str, ...], since_seq: int) -> tuple[int, Any]:
        index = self._replicas.order()[0]
        request = calls.watch_request(targets, since_seq)
        return index, self._stubs[index].Watch(request, metadata=metadata(self._token))

    def check(
        self,
        principal: str,
        target: str,
        lease_epoch: int,
        verb: str,
        *,
        url: str = "",
        element_role: str = "",
        element_name: str = "",
        password_field: bool = False,
        action_id: str = "",
        window_class: str = "",
        window_title: str = "",
        fingerprint: str = "",
        observation_id: str = "",
        context: ElementContext | None = None,
        document_load: bool = False,
        approval_asked: str = "",
    ) -> Decision:
        """Ask whether ``principal`` may do ``verb`` on ``target`` under ``lease_epoch``.

        ``fingerprint`` (the executor's digest of the exact action) binds an approval to the
        action; without it an action that needs approval is refused.
        """
        return self._send(
            calls.check(
                principal,
                target,
                lease_epoch,
                verb,
                url=url,
                element_role=element_role,
                element_name=element_name,
                password_field=password_field,
                action_id=action_id,
                window_class=window_class,
                window_title=window_title,
                fingerprint=fingerprint,
                observation_id=observation_id,
                context=context,
                document_load=document_load,
                approval_asked=approval_asked,
            )
        )

    def grant(
        self,
        principal: str,
        target: str,
        verbs: list[str],
        origins: list[str],
        expires_at_ms: int = 0,
        note: str = "",
        *,
        ttl_ms: int = 0,
        **scope: Any,
    ) -> GrantInfo:
        """Grant ``principal`` the ``verbs`` on ``target`` within ``origins`` (operator).

        ``target`` may be an fnmatch pattern (``browser:*``). It ends at ``expires_at_ms``
        (unix ms), or ``ttl_ms`` after the sidecar receives it, by the sidecar's clock (the
        database's on PostgreSQL: the right choice when this host's clock may be off); not
        both; neither: no expiry. Keyword arguments set the other fields of
        :class:`GrantInfo`: ``path_globs``, ``role_patterns``, ``name_patterns``,
        ``window_class_patterns``, ``window_title_patterns`` (fnmatch patterns; empty =
        any), ``allow_password_input``, ``single_use``, ``task_id``,
        ``require_approval_verbs`` and ``approval_timeout_ms``.
        """
        return self._send(calls.grant(principal, target, verbs, origins, expires_at_ms, note, scope, ttl_ms))

    def revoke(self, grant_id: str) -> GrantInfo:
        """Revoke a grant (operator); return it."""
        return self._send(calls.revoke(grant_id))

    def list_grants(self, principal: str = "", target: str = "", include_inactive: bool = False) -> list[GrantInfo]:
        """List grants, optionally filtered; expired and revoked ones only when asked."""
        return self._send(calls.list_grants(principal, target, include_inactive))

    def acquire(self, target: str, holder: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """Acquire (or renew, if already held by ``holder``) the lease of ``target``."""
        return self._send(calls.acquire(target, holder, ttl_ms))

    def renew(self, target: str, epoch: int, holder: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """Extend the lease held at ``epoch``; the epoch does not change."""
        return self._send(calls.renew(target, epoch, holder, ttl_ms))

    def release(self, target: str, epoch: int, holder: str = "") -> LeaseInfo:
        """Give up the lease held at ``epoch``."""
        return self._send(calls.release(target, epoch, holder))

    def take_over(self, target: str, ttl_ms: int = 0, note: str = "") -> LeaseInfo:
        """Take human control of ``target`` (operator); always bumps the epoch."""
        return self._send(calls.take_over(target, ttl_ms, note))

    def hand_back(self, target: str, epoch: int, next_holder: str = "") -> LeaseInfo:
        """Free the lease held at ``epoch`` (operator), optionally for one agent next."""
        return self._send(calls.hand_back(target, epoch, next_holder))

    def get_lease(self, target: str) -> LeaseInfo:
        """The current lease of ``target``."""
        return self._send(calls.get_lease(target))

    def who_am_i(self, token: str | None = None) -> tuple[str, str]:
        """Return ``(principal, role)`` of this client's token, or of ``token`` if given."""
        return self._send(calls.who_am_i(), token)

    def check_human_input(
        self, token: str, person: str, target: str, lease_epoch: int, verb: str, *, url: str = "", action_id: str = ""
    ) -> Decision:
        """May ``person`` (whose ``token`` this call carries) send input to ``target`` now?

        Allowed only while the person holds the live lease as a person at ``lease_epoch``.
        """
        call = calls.check_human_input(person, target, lease_epoch, verb, url=url, action_id=action_id)
        return self._send(call, token=token)

    def list_leases(self) -> list[LeaseInfo]:
        """Every target's lease as it stands now (executor, operator, admin)."""
        return self._send(calls.list_leases())

    def list_principals(self) -> list[PrincipalInfo]:
        """Every principal, by name, never a token (operator, admin)."""
        return self._send(calls.list_principals())

    def revoke_principal(self, name: str) -> PrincipalInfo:
        """Revoke a principal: its token fails on the very next call (admin)."""
        return self._send(calls.revoke_principal(name))

    def rotate_token(self, name: str, expires_at_ms: int = 0) -> tuple[PrincipalInfo, str]:
        """A new token for ``name`` (the old one fails at once); (principal, token) (admin)."""
        return self._send(calls.rotate_token(name, expires_at_ms))

    def close_task(self, task_id: str) -> list[GrantInfo]:
        """End every grant bound to ``task_id`` (operator); return them."""
        return self._send(calls.close_task(task_id))

    def report_activity(self, target: str, note: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """A person is at the desk of ``target`` (executor): the lease goes to
        ``desk:<target>``, a human, and the epoch moves."""
        return self._send(calls.report_activity(target, note, ttl_ms))

    def expire_lease(self, target: str) -> LeaseInfo:
        """Make the current lease of ``target`` lapse now (admin)."""
        return self._send(calls.expire_lease(target))

    def approve(self, approval_id: str, note: str = "") -> ApprovalInfo:
        """Approve a pending approval (operator)."""
        return self._send(calls.approve(approval_id, note))

    def deny(self, approval_id: str, note: str = "") -> ApprovalInfo:
        """Deny a pending approval (operator)."""
        return self._send(calls.deny(approval_id, note))

    def get_approval(self, approval_id: str) -> ApprovalInfo:
        """One approval (executor, operator, or the agent it is for)."""
        return self._send(calls.get_approval(approval_id))

    def list_approvals(
        self, status: str = "", principal: str = "", target: str = "", limit: int = 0
    ) -> list[ApprovalInfo]:
        """Approvals, newest first; ``status`` is ``pending``, ``approved`` ... or empty."""
        return self._send(calls.list_approvals(status, principal, target, limit))

    def reload_policies(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Reload the policies (operator); return (enforced ids, shadow ids).

        A broken set raises :class:`AuthzRpcError` (``FAILED_PRECONDITION``, ``FILE:LINE``)
        and the old set stays in force.
        """
        return self._send(calls.reload_policies())

    def explain_decision(self, decision_id: str) -> tuple[DecisionRecord, str]:
        """A logged decision and a readable account of it."""
        return self._send(calls.explain_decision(decision_id))

    def list_decisions(
        self,
        principal: str = "",
        target: str = "",
        reason: str = "",
        since_ms: int = 0,
        limit: int = 0,
    ) -> list[DecisionRecord]:
        """Logged decisions, newest first (``limit`` 0 = 50)."""
        return self._send(calls.list_decisions(principal, target, reason, since_ms, limit))

    def watch(self, targets: Iterable[str] = (), since_seq: int = 0) -> WatchStream:
        """Changes to the leases, grants and approvals of ``targets`` (all when empty) and
        policy reloads, as they commit: an iterator of :class:`WatchEventInfo`.

        ``since_seq`` replays what happened after that sequence number (or, when the server
        no longer has it, starts with the current lease of each target, change ``resync``).
        Iteration raises :class:`AuthzUnavailableError` when the sidecar goes away and
        :class:`AuthzRpcError` for other errors; :meth:`WatchStream.close` (from any thread)
        ends it quietly.
        """
        return WatchStream(self, targets, since_seq)

    def close(self) -> None:
        """Close the channels."""
        for channel in self._replicas.channels:
            channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
