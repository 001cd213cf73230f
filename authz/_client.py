"""Clients of the sidecar: :class:`AuthzClient` (blocking) and :class:`AsyncAuthzClient`.

Both take the sidecar's address and the caller's bearer token, speak plain types
(:class:`Decision`, :class:`LeaseInfo`, :class:`GrantInfo`, lowercase verb strings), and raise
:class:`AuthzUnavailableError` when the sidecar is unreachable or too slow, and
:class:`AuthzRpcError` for any other error status.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc
import grpc.aio

from handrail.authz import _wire
from handrail.authz._core import (
    ApprovalInfo,
    CheckInput,
    Decision,
    DecisionRecord,
    GrantInfo,
    LeaseInfo,
    WatchEventInfo,
)
from handrail.authz._errors import AuthzRpcError, AuthzUnavailableError
from handrail.proto.authz.v1 import authz_pb2 as pb
from handrail.proto.authz.v1 import authz_pb2_grpc

_T = TypeVar("_T")
_UNAVAILABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def _map_error(exc: grpc.RpcError, address: str) -> Exception:
    code: grpc.StatusCode = exc.code()
    details: str = exc.details() or ""
    if code in _UNAVAILABLE:
        return AuthzUnavailableError(f"authz at {address} is unavailable ({code.name}): {details}")
    return AuthzRpcError(code.name, details)


def _metadata(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


# Request builders shared by both clients; each returns (method, request, decoder).
_Call = tuple[str, Any, Callable[[Any], _T]]


def _check(
    principal: str,
    target: str,
    lease_epoch: int,
    verb: str,
    url: str,
    element_role: str,
    element_name: str,
    password_field: bool,
    action_id: str,
    window_class: str,
    window_title: str,
    fingerprint: str = "",
    observation_id: str = "",
) -> _Call[Decision]:
    request = _wire.check_request_to_pb(
        CheckInput(
            principal=principal,
            target=target,
            lease_epoch=lease_epoch,
            verb=verb,
            url=url,
            element_role=element_role,
            element_name=element_name,
            window_class=window_class,
            window_title=window_title,
            password_field=password_field,
            action_id=action_id,
            fingerprint=fingerprint,
            observation_id=observation_id,
        )
    )
    return "Check", request, _wire.decision_from_pb


def _grant(
    principal: str,
    target: str,
    verbs: list[str],
    origins: list[str],
    expires_at_ms: int,
    note: str,
    scope: dict[str, Any],
) -> _Call[GrantInfo]:
    fields = {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in scope.items()}
    grant = GrantInfo(
        "",
        principal,
        target,
        tuple(verbs),
        tuple(origins),
        expires_at_ms,
        note=note,
        **fields,  # type: ignore[arg-type]
    )
    return (
        "Grant",
        pb.GrantRequest(grant=_wire.grant_to_pb(grant)),
        lambda r: _wire.grant_from_pb(r.grant),
    )


def _revoke(grant_id: str) -> _Call[GrantInfo]:
    return "Revoke", pb.RevokeRequest(grant_id=grant_id), lambda r: _wire.grant_from_pb(r.grant)


def _list_grants(principal: str, target: str, include_inactive: bool) -> _Call[list[GrantInfo]]:
    request = pb.ListGrantsRequest(principal=principal, target=target, include_inactive=include_inactive)
    return "ListGrants", request, lambda r: [_wire.grant_from_pb(g) for g in r.grants]


def _who_am_i() -> _Call[tuple[str, str]]:
    return "WhoAmI", pb.WhoAmIRequest(), lambda r: (r.principal, _wire.role_from_pb(r.role))


def _lease(method: str, request: Any) -> _Call[LeaseInfo]:
    return method, request, _wire.lease_from_pb


def _grants_of(response: Any) -> list[GrantInfo]:
    return [_wire.grant_from_pb(g) for g in response.grants]


def _approval(method: str, request: Any) -> _Call[ApprovalInfo]:
    return method, request, lambda r: _wire.approval_from_pb(r.approval)


def _list_approvals(status: str, principal: str, target: str, limit: int) -> _Call[list[ApprovalInfo]]:
    request = pb.ListApprovalsRequest(
        status=_wire.status_to_pb(status) if status else pb.APPROVAL_STATUS_UNSPECIFIED,
        principal=principal,
        target=target,
        limit=limit,
    )
    return (
        "ListApprovals",
        request,
        lambda r: [_wire.approval_from_pb(a) for a in r.approvals],
    )


def _reload() -> _Call[tuple[tuple[str, ...], tuple[str, ...]]]:
    return (
        "ReloadPolicies",
        pb.ReloadPoliciesRequest(),
        lambda r: (tuple(r.policy_ids), tuple(r.shadow_policy_ids)),
    )


def _explain(decision_id: str) -> _Call[tuple[DecisionRecord, str]]:
    return (
        "ExplainDecision",
        pb.ExplainDecisionRequest(decision_id=decision_id),
        lambda r: (_wire.record_from_pb(r.decision), r.text),
    )


def _list_decisions(principal: str, target: str, reason: str, since_ms: int, limit: int) -> _Call[list[DecisionRecord]]:
    request = pb.ListDecisionsRequest(
        principal=principal,
        target=target,
        reason=_wire.reason_to_pb(reason) if reason else pb.REASON_UNSPECIFIED,
        since_ms=since_ms,
        limit=limit,
    )
    return "ListDecisions", request, lambda r: [_wire.record_from_pb(d) for d in r.decisions]


def _channel_args(root_certificates: bytes | None, server_name: str | None) -> Any:
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
    if root_certificates is None:
        return None, options
    return grpc.ssl_channel_credentials(root_certificates=root_certificates), options


class WatchStream(Iterator[WatchEventInfo]):
    """The events of one ``Watch`` call; iterate it, close it from any thread."""

    def __init__(self, call: Any, address: str) -> None:
        self._call = call
        self._address = address
        self._closed = False

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> WatchEventInfo:
        try:
            return _wire.event_from_pb(next(self._call))
        except grpc.RpcError as exc:
            if self._closed or exc.code() == grpc.StatusCode.CANCELLED:
                raise StopIteration from None
            raise _map_error(exc, self._address) from None

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
        address: ``HOST:PORT`` of the sidecar.
        token: the caller's bearer token.
        timeout_s: the deadline of each call, in seconds.
        root_certificates: PEM CA certificates: speak TLS and trust these (None: plaintext).
        server_name: the name to expect in the server's certificate, when it is not the host
            of ``address``.
    """

    def __init__(
        self,
        address: str,
        token: str,
        timeout_s: float = 2.0,
        *,
        root_certificates: bytes | None = None,
        server_name: str | None = None,
    ) -> None:
        self.address = address
        self._token = token
        self._timeout = timeout_s
        credentials, options = _channel_args(root_certificates, server_name)
        if credentials is None:
            self._channel = grpc.insecure_channel(address, options=options)
        else:
            self._channel = grpc.secure_channel(address, credentials, options=options)
        self._stub = authz_pb2_grpc.AuthzStub(self._channel)  # type: ignore[no-untyped-call]

    def _call(self, call: _Call[_T], token: str | None = None) -> _T:
        method, request, decode = call
        try:
            response = getattr(self._stub, method)(
                request,
                metadata=_metadata(self._token if token is None else token),
                timeout=self._timeout,
            )
        except grpc.RpcError as exc:
            raise _map_error(exc, self.address) from None
        return decode(response)

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
    ) -> Decision:
        """Ask whether ``principal`` may do ``verb`` on ``target`` under ``lease_epoch``.

        ``fingerprint`` (the executor's digest of the exact action) binds an approval to the
        action; without it an action that needs approval is refused.
        """
        return self._call(
            _check(
                principal,
                target,
                lease_epoch,
                verb,
                url,
                element_role,
                element_name,
                password_field,
                action_id,
                window_class,
                window_title,
                fingerprint,
                observation_id,
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
        **scope: Any,
    ) -> GrantInfo:
        """Grant ``principal`` the ``verbs`` on ``target`` within ``origins`` (operator).

        ``target`` may be an fnmatch pattern (``browser:*``). Keyword arguments set the
        other fields of :class:`GrantInfo`: ``path_globs``, ``role_patterns``,
        ``name_patterns``, ``window_class_patterns``, ``window_title_patterns`` (fnmatch
        patterns; empty = any), ``allow_password_input``, ``single_use``, ``task_id``,
        ``require_approval_verbs`` and ``approval_timeout_ms``.
        """
        return self._call(_grant(principal, target, verbs, origins, expires_at_ms, note, scope))

    def revoke(self, grant_id: str) -> GrantInfo:
        """Revoke a grant (operator); return it."""
        return self._call(_revoke(grant_id))

    def list_grants(self, principal: str = "", target: str = "", include_inactive: bool = False) -> list[GrantInfo]:
        """List grants, optionally filtered; expired and revoked ones only when asked."""
        return self._call(_list_grants(principal, target, include_inactive))

    def acquire(self, target: str, holder: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """Acquire (or renew, if already held by ``holder``) the lease of ``target``."""
        return self._call(_lease("Acquire", pb.AcquireRequest(target=target, holder=holder, ttl_ms=ttl_ms)))

    def renew(self, target: str, epoch: int, holder: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """Extend the lease held at ``epoch``; the epoch does not change."""
        request = pb.RenewRequest(target=target, holder=holder, epoch=epoch, ttl_ms=ttl_ms)
        return self._call(_lease("Renew", request))

    def release(self, target: str, epoch: int, holder: str = "") -> LeaseInfo:
        """Give up the lease held at ``epoch``."""
        request = pb.ReleaseRequest(target=target, holder=holder, epoch=epoch)
        return self._call(_lease("Release", request))

    def take_over(self, target: str, ttl_ms: int = 0, note: str = "") -> LeaseInfo:
        """Take human control of ``target`` (operator); always bumps the epoch."""
        request = pb.TakeOverRequest(target=target, ttl_ms=ttl_ms, note=note)
        return self._call(_lease("TakeOver", request))

    def hand_back(self, target: str, epoch: int, next_holder: str = "") -> LeaseInfo:
        """Free the lease held at ``epoch`` (operator), optionally for one agent next."""
        request = pb.HandBackRequest(target=target, epoch=epoch, next_holder=next_holder)
        return self._call(_lease("HandBack", request))

    def get_lease(self, target: str) -> LeaseInfo:
        """The current lease of ``target``."""
        return self._call(_lease("GetLease", pb.GetLeaseRequest(target=target)))

    def who_am_i(self, token: str | None = None) -> tuple[str, str]:
        """Return ``(principal, role)`` of this client's token, or of ``token`` if given."""
        return self._call(_who_am_i(), token)

    def close_task(self, task_id: str) -> list[GrantInfo]:
        """End every grant bound to ``task_id`` (operator); return them."""
        return self._call(("CloseTask", pb.CloseTaskRequest(task_id=task_id), _grants_of))

    def report_activity(self, target: str, note: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """A person is at the desk of ``target`` (executor): the lease goes to
        ``desk:<target>``, a human, and the epoch moves."""
        request = pb.ReportActivityRequest(target=target, note=note, ttl_ms=ttl_ms)
        return self._call(_lease("ReportActivity", request))

    def expire_lease(self, target: str) -> LeaseInfo:
        """Make the current lease of ``target`` lapse now (admin)."""
        return self._call(_lease("ExpireLease", pb.ExpireLeaseRequest(target=target)))

    def approve(self, approval_id: str, note: str = "") -> ApprovalInfo:
        """Approve a pending approval (operator)."""
        request = pb.ApproveRequest(approval_id=approval_id, note=note)
        return self._call(_approval("Approve", request))

    def deny(self, approval_id: str, note: str = "") -> ApprovalInfo:
        """Deny a pending approval (operator)."""
        return self._call(_approval("Deny", pb.DenyRequest(approval_id=approval_id, note=note)))

    def get_approval(self, approval_id: str) -> ApprovalInfo:
        """One approval (executor, operator, or the agent it is for)."""
        request = pb.GetApprovalRequest(approval_id=approval_id)
        return self._call(_approval("GetApproval", request))

    def list_approvals(
        self, status: str = "", principal: str = "", target: str = "", limit: int = 0
    ) -> list[ApprovalInfo]:
        """Approvals, newest first; ``status`` is ``pending``, ``approved`` ... or empty."""
        return self._call(_list_approvals(status, principal, target, limit))

    def reload_policies(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Reload the policies (operator); return (enforced ids, shadow ids).

        A broken set raises :class:`AuthzRpcError` (``FAILED_PRECONDITION``, ``FILE:LINE``)
        and the old set stays in force.
        """
        return self._call(_reload())

    def explain_decision(self, decision_id: str) -> tuple[DecisionRecord, str]:
        """A logged decision and a readable account of it."""
        return self._call(_explain(decision_id))

    def list_decisions(
        self,
        principal: str = "",
        target: str = "",
        reason: str = "",
        since_ms: int = 0,
        limit: int = 0,
    ) -> list[DecisionRecord]:
        """Logged decisions, newest first (``limit`` 0 = 50)."""
        return self._call(_list_decisions(principal, target, reason, since_ms, limit))

    def watch(self, targets: Iterable[str] = (), since_seq: int = 0) -> WatchStream:
        """Changes to the leases, grants and approvals of ``targets`` (all when empty) and
        policy reloads, as they commit: an iterator of :class:`WatchEventInfo`.

        ``since_seq`` replays what happened after that sequence number (or, when the server
        no longer has it, starts with the current lease of each target, change ``resync``).
        Iteration raises :class:`AuthzUnavailableError` when the sidecar goes away and
        :class:`AuthzRpcError` for other errors; :meth:`WatchStream.close` (from any thread)
        ends it quietly.
        """
        call = self._stub.Watch(
            pb.WatchRequest(targets=list(targets), since_seq=since_seq),
            metadata=_metadata(self._token),
        )
        return WatchStream(call, self.address)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncAuthzClient:
    """The asyncio twin of :class:`AuthzClient` (``grpc.aio``); every call is a coroutine.

    Args:
        address: ``HOST:PORT`` of the sidecar.
        token: the caller's bearer token.
        timeout_s: the deadline of each call, in seconds.
        root_certificates: PEM CA certificates: speak TLS and trust these (None: plaintext).
        server_name: the name to expect in the server's certificate.
    """

    def __init__(
        self,
        address: str,
        token: str,
        timeout_s: float = 2.0,
        *,
        root_certificates: bytes | None = None,
        server_name: str | None = None,
    ) -> None:
        self.address = address
        self._token = token
        self._timeout = timeout_s
        credentials, options = _channel_args(root_certificates, server_name)
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(address, options=options)
        else:
            self._channel = grpc.aio.secure_channel(address, credentials, options=options)
        self._stub = authz_pb2_grpc.AuthzStub(self._channel)  # type: ignore[no-untyped-call]

    async def _call(self, call: _Call[_T], token: str | None = None) -> _T:
        method, request, decode = call
        try:
            response = await getattr(self._stub, method)(
                request,
                metadata=_metadata(self._token if token is None else token),
                timeout=self._timeout,
            )
        except grpc.RpcError as exc:
            raise _map_error(exc, self.address) from None
        return decode(response)

    async def check(
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
    ) -> Decision:
        """See :meth:`AuthzClient.check`."""
        return await self._call(
            _check(
                principal,
                target,
                lease_epoch,
                verb,
                url,
                element_role,
                element_name,
                password_field,
                action_id,
                window_class,
                window_title,
                fingerprint,
                observation_id,
            )
        )

    async def grant(
        self,
        principal: str,
        target: str,
        verbs: list[str],
        origins: list[str],
        expires_at_ms: int = 0,
        note: str = "",
        **scope: Any,
    ) -> GrantInfo:
        """See :meth:`AuthzClient.grant`."""
        return await self._call(_grant(principal, target, verbs, origins, expires_at_ms, note, scope))

    async def revoke(self, grant_id: str) -> GrantInfo:
        """See :meth:`AuthzClient.revoke`."""
        return await self._call(_revoke(grant_id))

    async def list_grants(
        self, principal: str = "", target: str = "", include_inactive: bool = False
    ) -> list[GrantInfo]:
        """See :meth:`AuthzClient.list_grants`."""
        return await self._call(_list_grants(principal, target, include_inactive))

    async def acquire(self, target: str, holder: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """See :meth:`AuthzClient.acquire`."""
        return await self._call(_lease("Acquire", pb.AcquireRequest(target=target, holder=holder, ttl_ms=ttl_ms)))

    async def renew(self, target: str, epoch: int, holder: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """See :meth:`AuthzClient.renew`."""
        request = pb.RenewRequest(target=target, holder=holder, epoch=epoch, ttl_ms=ttl_ms)
        return await self._call(_lease("Renew", request))

    async def release(self, target: str, epoch: int, holder: str = "") -> LeaseInfo:
        """See :meth:`AuthzClient.release`."""
        request = pb.ReleaseRequest(target=target, holder=holder, epoch=epoch)
        return await self._call(_lease("Release", request))

    async def take_over(self, target: str, ttl_ms: int = 0, note: str = "") -> LeaseInfo:
        """See :meth:`AuthzClient.take_over`."""
        request = pb.TakeOverRequest(target=target, ttl_ms=ttl_ms, note=note)
        return await self._call(_lease("TakeOver", request))

    async def hand_back(self, target: str, epoch: int, next_holder: str = "") -> LeaseInfo:
        """See :meth:`AuthzClient.hand_back`."""
        request = pb.HandBackRequest(target=target, epoch=epoch, next_holder=next_holder)
        return await self._call(_lease("HandBack", request))

    async def get_lease(self, target: str) -> LeaseInfo:
        """See :meth:`AuthzClient.get_lease`."""
        return await self._call(_lease("GetLease", pb.GetLeaseRequest(target=target)))

    async def who_am_i(self, token: str | None = None) -> tuple[str, str]:
        """See :meth:`AuthzClient.who_am_i`."""
        return await self._call(_who_am_i(), token)

    async def close_task(self, task_id: str) -> list[GrantInfo]:
        """See :meth:`AuthzClient.close_task`."""
        return await self._call(("CloseTask", pb.CloseTaskRequest(task_id=task_id), _grants_of))

    async def report_activity(self, target: str, note: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """See :meth:`AuthzClient.report_activity`."""
        request = pb.ReportActivityRequest(target=target, note=note, ttl_ms=ttl_ms)
        return await self._call(_lease("ReportActivity", request))

    async def expire_lease(self, target: str) -> LeaseInfo:
        """See :meth:`AuthzClient.expire_lease`."""
        return await self._call(_lease("ExpireLease", pb.ExpireLeaseRequest(target=target)))

    async def approve(self, approval_id: str, note: str = "") -> ApprovalInfo:
        """See :meth:`AuthzClient.approve`."""
        request = pb.ApproveRequest(approval_id=approval_id, note=note)
        return await self._call(_approval("Approve", request))

    async def deny(self, approval_id: str, note: str = "") -> ApprovalInfo:
        """See :meth:`AuthzClient.deny`."""
        request = pb.DenyRequest(approval_id=approval_id, note=note)
        return await self._call(_approval("Deny", request))

    async def get_approval(self, approval_id: str) -> ApprovalInfo:
        """See :meth:`AuthzClient.get_approval`."""
        request = pb.GetApprovalRequest(approval_id=approval_id)
        return await self._call(_approval("GetApproval", request))

    async def list_approvals(
        self, status: str = "", principal: str = "", target: str = "", limit: int = 0
    ) -> list[ApprovalInfo]:
        """See :meth:`AuthzClient.list_approvals`."""
        return await self._call(_list_approvals(status, principal, target, limit))

    async def reload_policies(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """See :meth:`AuthzClient.reload_policies`."""
        return await self._call(_reload())

    async def explain_decision(self, decision_id: str) -> tuple[DecisionRecord, str]:
        """See :meth:`AuthzClient.explain_decision`."""
        return await self._call(_explain(decision_id))

    async def list_decisions(
        self,
        principal: str = "",
        target: str = "",
        reason: str = "",
        since_ms: int = 0,
        limit: int = 0,
    ) -> list[DecisionRecord]:
        """See :meth:`AuthzClient.list_decisions`."""
        return await self._call(_list_decisions(principal, target, reason, since_ms, limit))

    async def watch(
        self,
        targets: Iterable[str] = (),
        since_seq: int = 0,
        on_established: Callable[[], None] | None = None,
    ) -> AsyncIterator[WatchEventInfo]:
        """See :meth:`AuthzClient.watch`; an async iterator.

        ``on_established`` is called once the sidecar has subscribed the stream, before
        any event: from then on every change is pushed.
        """
        call = self._stub.Watch(
            pb.WatchRequest(targets=list(targets), since_seq=since_seq),
            metadata=_metadata(self._token),
        )
        try:
            if on_established is not None:
                await call.initial_metadata()
                on_established()
            async for msg in call:
                yield _wire.event_from_pb(msg)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.CANCELLED:
                return
            raise _map_error(exc, self.address) from None
        finally:
            call.cancel()

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close(None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
