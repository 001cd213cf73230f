"""The asyncio client of the sidecar, :class:`AsyncAuthzClient` (``grpc.aio``).

It is :class:`~handrail.authz.AuthzClient` with every call awaited: the same calls from
:mod:`._wire_calls`, the same error mapping (:func:`._channel.map_grpc_errors`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc
import grpc.aio

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


class AsyncAuthzClient:
    """The asyncio twin of :class:`~handrail.authz.AuthzClient`; every call is a coroutine.

    Args:
        address: ``HOST:PORT`` of the sidecar, or of its replicas (``"a:7700,b:7700"`` or a
            list): balanced, with failover (see :mod:`._balance`).
        token: the caller's bearer token.
        timeout_s: the deadline of each call, in seconds.
        root_certificates: PEM CA certificates: speak TLS and trust these (None: plaintext).
        server_name: the name to expect in the server's certificate.
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

        def connect(target: str) -> grpc.aio.Channel:
            if credentials is None:
                return grpc.aio.insecure_channel(target, options=options)
            return grpc.aio.secure_channel(target, credentials, options=options)

        self._replicas = Replicas(address, connect)
        self.address = ",".join(self._replicas.addresses)
        self._stubs = [authz_pb2_grpc.AuthzStub(ch) for ch in self._replicas.channels]  # type: ignore[no-untyped-call]

    async def _send(self, call: calls.Call[_T], token: str | None = None) -> _T:
        """See :meth:`AuthzClient._send`: one deadline for the call, failover within it."""
        attempts = Attempts(self._replicas, call.rpc, self._timeout)
        for index, timeout in attempts:
            try:
                response = await getattr(self._stubs[index], call.rpc)(
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
        context: ElementContext | None = None,
        document_load: bool = False,
        approval_asked: str = "",
    ) -> Decision:
        """See :meth:`AuthzClient.check`."""
        return await self._send(
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

    async def grant(
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
        """See :meth:`AuthzClient.grant`."""
        return await self._send(calls.grant(principal, target, verbs, origins, expires_at_ms, note, scope, ttl_ms))

    async def revoke(self, grant_id: str) -> GrantInfo:
        """See :meth:`AuthzClient.revoke`."""
        return await self._send(calls.revoke(grant_id))

    async def list_grants(
        self, principal: str = "", target: str = "", include_inactive: bool = False
    ) -> list[GrantInfo]:
        """See :meth:`AuthzClient.list_grants`."""
        return await self._send(calls.list_grants(principal, target, include_inactive))

    async def acquire(self, target: str, holder: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """See :meth:`AuthzClient.acquire`."""
        return await self._send(calls.acquire(target, holder, ttl_ms))

    async def renew(self, target: str, epoch: int, holder: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """See :meth:`AuthzClient.renew`."""
        return await self._send(calls.renew(target, epoch, holder, ttl_ms))

    async def release(self, target: str, epoch: int, holder: str = "") -> LeaseInfo:
        """See :meth:`AuthzClient.release`."""
        return await self._send(calls.release(target, epoch, holder))

    async def take_over(self, target: str, ttl_ms: int = 0, note: str = "") -> LeaseInfo:
        """See :meth:`AuthzClient.take_over`."""
        return await self._send(calls.take_over(target, ttl_ms, note))

    async def hand_back(self, target: str, epoch: int, next_holder: str = "") -> LeaseInfo:
        """See :meth:`AuthzClient.hand_back`."""
        return await self._send(calls.hand_back(target, epoch, next_holder))

    async def get_lease(self, target: str) -> LeaseInfo:
        """See :meth:`AuthzClient.get_lease`."""
        return await self._send(calls.get_lease(target))

    async def who_am_i(self, token: str | None = None) -> tuple[str, str]:
        """See :meth:`AuthzClient.who_am_i`."""
        return await self._send(calls.who_am_i(), token)

    async def check_human_input(
        self, token: str, person: str, target: str, lease_epoch: int, verb: str, *, url: str = "", action_id: str = ""
    ) -> Decision:
        """See :meth:`AuthzClient.check_human_input`."""
        call = calls.check_human_input(person, target, lease_epoch, verb, url=url, action_id=action_id)
        return await self._send(call, token=token)

    async def list_leases(self) -> list[LeaseInfo]:
        """See :meth:`AuthzClient.list_leases`."""
        return await self._send(calls.list_leases())

    async def list_principals(self) -> list[PrincipalInfo]:
        """Every principal, by name, never a token (operator, admin)."""
        return await self._send(calls.list_principals())

    async def revoke_principal(self, name: str) -> PrincipalInfo:
        """Revoke a principal: its token fails on the very next call (admin)."""
        return await self._send(calls.revoke_principal(name))

    async def rotate_token(self, name: str, expires_at_ms: int = 0) -> tuple[PrincipalInfo, str]:
        """A new token for ``name`` (the old one fails at once); (principal, token) (admin)."""
        return await self._send(calls.rotate_token(name, expires_at_ms))

    async def close_task(self, task_id: str) -> list[GrantInfo]:
        """See :meth:`AuthzClient.close_task`."""
        return await self._send(calls.close_task(task_id))

    async def report_activity(self, target: str, note: str = "", ttl_ms: int = 0) -> LeaseInfo:
        """See :meth:`AuthzClient.report_activity`."""
        return await self._send(calls.report_activity(target, note, ttl_ms))

    async def expire_lease(self, target: str) -> LeaseInfo:
        """See :meth:`AuthzClient.expire_lease`."""
        return await self._send(calls.expire_lease(target))

    async def approve(self, approval_id: str, note: str = "") -> ApprovalInfo:
        """See :meth:`AuthzClient.approve`."""
        return await self._send(calls.approve(approval_id, note))

    async def deny(self, approval_id: str, note: str = "") -> ApprovalInfo:
        """See :meth:`AuthzClient.deny`."""
        return await self._send(calls.deny(approval_id, note))

    async def get_approval(self, approval_id: str) -> ApprovalInfo:
        """See :meth:`AuthzClient.get_approval`."""
        return await self._send(calls.get_approval(approval_id))

    async def list_approvals(
        self, status: str = "", principal: str = "", target: str = "", limit: int = 0
    ) -> list[ApprovalInfo]:
        """See :meth:`AuthzClient.list_approvals`."""
        return await self._send(calls.list_approvals(status, principal, target, limit))

    async def reload_policies(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """See :meth:`AuthzClient.reload_policies`."""
        return await self._send(calls.reload_policies())

    async def explain_decision(self, decision_id: str) -> tuple[DecisionRecord, str]:
        """See :meth:`AuthzClient.explain_decision`."""
        return await self._send(calls.explain_decision(decision_id))

    async def list_decisions(
        self,
        principal: str = "",
        target: str = "",
        reason: str = "",
        since_ms: int = 0,
        limit: int = 0,
    ) -> list[DecisionRecord]:
        """See :meth:`AuthzClient.list_decisions`."""
        return await self._send(calls.list_decisions(principal, target, reason, since_ms, limit))

    async def watch(
        self,
        targets: Iterable[str] = (),
        since_seq: int = 0,
        on_established: Callable[[], None] | None = None,
    ) -> AsyncIterator[WatchEventInfo]:
        """See :meth:`AuthzClient.watch`; an async iterator on one replica (the next in turn).

        ``on_established`` is called once the sidecar has subscribed the stream, before
        any event: from then on every change is pushed. The stream does not move to another
        replica by itself (a caller that fences on it must know it is not live meanwhile):
        when it raises, watch again with ``since_seq`` set to the last event's ``seq``.
        """
        index = self._replicas.order()[0]
        address = self._replicas.addresses[index]
        call = self._stubs[index].Watch(calls.watch_request(targets, since_seq), metadata=metadata(self._token))
        try:
            with map_grpc_errors(address):
                if on_established is not None:
                    await call.initial_metadata()
                    on_established()
                async for msg in call:
                    yield event_from_pb(msg)
        except AuthzError as exc:
            if not is_cancelled(exc):
                if isinstance(exc, AuthzUnavailableError):
                    self._replicas.failed(index)
                raise
        finally:
            call.cancel()

    async def close(self) -> None:
        """Close the channels."""
        for channel in self._replicas.channels:
            await channel.close(None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
