"""Clients of the sidecar: :class:`AuthzClient` (blocking) and :class:`AsyncAuthzClient`.

Both take the sidecar's address and the caller's bearer token, speak plain types
(:class:`Decision`, :class:`LeaseInfo`, :class:`GrantInfo`, lowercase verb strings), and raise
:class:`AuthzUnavailableError` when the sidecar is unreachable or too slow, and
:class:`AuthzRpcError` for any other error status.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc
import grpc.aio
from handrail.authz import _wire
from handrail.authz._core import CheckInput, Decision, GrantInfo, LeaseInfo
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
) -> _Call[GrantInfo]:
    grant = GrantInfo("", principal, target, tuple(verbs), tuple(origins), expires_at_ms, note=note)
    return (
        "Grant",
        pb.GrantRequest(grant=_wire.grant_to_pb(grant)),
        lambda r: _wire.grant_from_pb(r.grant),
    )


def _revoke(grant_id: str) -> _Call[GrantInfo]:
    return "Revoke", pb.RevokeRequest(grant_id=grant_id), lambda r: _wire.grant_from_pb(r.grant)


def _list_grants(principal: str, target: str, include_inactive: bool) -> _Call[list[GrantInfo]]:
    request = pb.ListGrantsRequest(
        principal=principal, target=target, include_inactive=include_inactive
    )
    return "ListGrants", request, lambda r: [_wire.grant_from_pb(g) for g in r.grants]


def _who_am_i() -> _Call[tuple[str, str]]:
    return "WhoAmI", pb.WhoAmIRequest(), lambda r: (r.principal, _wire.role_from_pb(r.role))


def _lease(method: str, request: Any) -> _Call[LeaseInfo]:
    return method, request, _wire.lease_from_pb


class AuthzClient:
    """A blocking client of the sidecar.

    Args:
        address: ``HOST:PORT`` of the sidecar.
        token: the caller's bearer token.
        timeout_s: the deadline of each call, in seconds.
    """

    def __init__(self, address: str, token: str, timeout_s: float = 2.0) -> None:
        self.address = address
        self._token = token
        self._timeout = timeout_s
        self._channel = grpc.insecure_channel(address)
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
    ) -> Decision:
        """Ask whether ``principal`` may do ``verb`` on ``target`` under ``lease_epoch``."""
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
    ) -> GrantInfo:
        """Grant ``principal`` the ``verbs`` on ``target`` within ``origins`` (operator)."""
        return self._call(_grant(principal, target, verbs, origins, expires_at_ms, note))

    def revoke(self, grant_id: str) -> GrantInfo:
        """Revoke a grant (operator); return it."""
        return self._call(_revoke(grant_id))

    def list_grants(
        self, principal: str = "", target: str = "", include_inactive: bool = False
    ) -> list[GrantInfo]:
        """List grants, optionally filtered; expired and revoked ones only when asked."""
        return self._call(_list_grants(principal, target, include_inactive))

    def acquire(self, target: str, holder: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """Acquire (or renew, if already held by ``holder``) the lease of ``target``."""
        return self._call(
            _lease("Acquire", pb.AcquireRequest(target=target, holder=holder, ttl_ms=ttl_ms))
        )

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
    """

    def __init__(self, address: str, token: str, timeout_s: float = 2.0) -> None:
        self.address = address
        self._token = token
        self._timeout = timeout_s
        self._channel = grpc.aio.insecure_channel(address)
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
    ) -> GrantInfo:
        """See :meth:`AuthzClient.grant`."""
        return await self._call(_grant(principal, target, verbs, origins, expires_at_ms, note))

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
        return await self._call(
            _lease("Acquire", pb.AcquireRequest(target=target, holder=holder, ttl_ms=ttl_ms))
        )

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
