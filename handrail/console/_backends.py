"""What the console talks to: the authz sidecar and the executors, as the signed-in operator.

Every call carries the operator's own token: the sidecar and the executors decide what
the operator may do, never the console. ``Backends.overview`` gathers what the overview
shows — every target with its lease, its sessions and agents, their last action, the
pending approvals, the requests for a person and the actions awaiting reconciliation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from handrail.authz import ApprovalInfo, AsyncAuthzClient, AuthzError, LeaseInfo
from handrail.executor import ConsoleClient, ExecutorRpcError, SessionSummary

__all__ = ["Backends", "Overview", "TargetView"]


@dataclass
class TargetView:
    """One target as the overview shows it."""

    target: str
    lease: LeaseInfo
    sessions: list[tuple[str, SessionSummary]] = field(default_factory=list)  # (executor, session)
    approvals: list[ApprovalInfo] = field(default_factory=list)

    @property
    def waiting_for_reconcile(self) -> list[str]:
        return sorted({a for _, s in self.sessions for a in s.unknown_actions})

    @property
    def person_requests(self) -> list[SessionSummary]:
        return [
            s for _, s in self.sessions if s.person_request is not None and s.person_request.status != "HANDED_BACK"
        ]


@dataclass
class Overview:
    targets: list[TargetView]
    approvals: list[ApprovalInfo]
    errors: list[str]

    def digest(self) -> str:
        """What changes when anything the overview shows changes."""
        parts = [repr(self.errors)]
        for t in self.targets:
            parts.append(repr((t.target, t.lease, [s for _, s in t.sessions], [a.approval_id for a in t.approvals])))
        parts.append(repr([(a.approval_id, a.status) for a in self.approvals]))
        return "\n".join(parts)


class Backends:
    """The sidecar and the executors of one console.

    Args:
        authz_address: the sidecar's ``HOST:PORT``.
        executors: the executors' ``HOST:PORT``, each with a name for the pages.
        authz_root_certificates: PEM CA certificates when the sidecar speaks TLS.
        authz_server_name: the name its certificate carries, when not the host dialled.
        executor_root_certificates: PEM CA certificates when the executors speak TLS.
        executor_server_name: the name their certificates carry, when not the host dialled.
    """

    def __init__(
        self,
        authz_address: str,
        executors: list[str],
        authz_root_certificates: bytes | None = None,
        authz_server_name: str = "",
        *,
        executor_root_certificates: bytes | None = None,
        executor_server_name: str = "",
    ) -> None:
        self.authz_address = authz_address
        self._roots = authz_root_certificates
        self._server_name = authz_server_name or None
        self._executor_tls = (executor_root_certificates, executor_server_name or None)
        self.addresses = list(executors)
        self._executors: dict[str, ConsoleClient] = {}  # made in the server's event loop
        self._sidecars: dict[str, AsyncAuthzClient] = {}
        self._where: dict[str, str] = {}  # session id -> the executor that has it

    def where(self, session_id: str) -> str | None:
        """The executor a session was last found on (a person's input skips the lookup)."""
        return self._where.get(session_id)

    def executor(self, address: str) -> ConsoleClient:
        """The client of the executor at ``address`` (made on first use, in the running loop)."""
        client = self._executors.get(address)
        if client is None:
            roots, server_name = self._executor_tls
            client = ConsoleClient(address, root_certificates=roots, server_name=server_name)
            self._executors[address] = client
        return client

    def sidecar(self, token: str) -> AsyncAuthzClient:
        """A sidecar client speaking with ``token`` (one per signed-in operator)."""
        client = self._sidecars.get(token)
        if client is None:
            client = AsyncAuthzClient(
                self.authz_address, token, timeout_s=5.0, root_certificates=self._roots, server_name=self._server_name
            )
            self._sidecars[token] = client
        return client

    async def forget(self, token: str) -> None:
        client = self._sidecars.pop(token, None)
        if client is not None:
            await client.close()

    async def who(self, token: str) -> tuple[str, str]:
        """``(principal, role)`` of a token, as the sidecar says (AuthzError if unknown)."""
        client = AsyncAuthzClient(
            self.authz_address, token, timeout_s=5.0, root_certificates=self._roots, server_name=self._server_name
        )
        try:
            return await client.who_am_i()
        finally:
            await client.close()

    async def sessions(self, token: str) -> tuple[list[tuple[str, SessionSummary]], list[str]]:
        """Every executor's open sessions, and what could not be read."""
        found: list[tuple[str, SessionSummary]] = []
        errors: list[str] = []

        async def one(address: str, client: ConsoleClient) -> None:
            try:
                found.extend((address, s) for s in await client.list_sessions(token))
            except ExecutorRpcError as exc:
                errors.append(f"executor {address}: {exc}")

        await asyncio.gather(*(one(a, self.executor(a)) for a in self.addresses))
        return found, errors

    async def find_session(self, token: str, session_id: str) -> tuple[str, SessionSummary] | None:
        """The executor that has ``session_id``, and the session with its latest snapshot."""
        for address in self.addresses:
            try:
                got = await self.executor(address).list_sessions(token, session_id)
            except ExecutorRpcError as exc:
                if exc.code_name == "UNAUTHENTICATED":
                    raise  # the operator's token, not the session: the sign-in ends
                continue
            if got:
                self._where[session_id] = address
                return address, got[0]
        return None

    async def overview(self, token: str) -> Overview:
        sidecar = self.sidecar(token)
        errors: list[str] = []
        leases: list[LeaseInfo] = []
        approvals: list[ApprovalInfo] = []
        try:
            leases, approvals = await asyncio.gather(sidecar.list_leases(), sidecar.list_approvals(status="PENDING"))
        except AuthzError as exc:
            errors.append(f"authz sidecar: {exc}")
        sessions, problems = await self.sessions(token)
        errors.extend(problems)
        targets: dict[str, TargetView] = {lease.target: TargetView(lease.target, lease) for lease in leases}
        for address, s in sessions:
            view = targets.setdefault(s.target, TargetView(s.target, LeaseInfo(s.target)))
            view.sessions.append((address, s))
        for approval in approvals:
            view = targets.setdefault(approval.target, TargetView(approval.target, LeaseInfo(approval.target)))
            view.approvals.append(approval)
        ordered = sorted(targets.values(), key=lambda t: (not t.sessions and not t.approvals, t.target))
        return Overview(ordered, approvals, errors)

    async def changes(self, token: str) -> AsyncIterator[None]:
        """Yields each time the sidecar publishes a lease, grant or approval change."""
        sidecar = self.sidecar(token)
        while True:
            try:
                async for _ in sidecar.watch(()):
                    yield None
            except AuthzError:
                await asyncio.sleep(1.0)

    async def close(self) -> None:
        for client in self._executors.values():
            await client.close()
        self._executors.clear()
        for sidecar in self._sidecars.values():
            await sidecar.close()
        self._sidecars.clear()
