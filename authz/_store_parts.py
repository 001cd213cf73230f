"""What both stores do the same way: hand a protocol call to the part that owns it.

:class:`~handrail.authz.SqliteStore` and :class:`~handrail.authz.PgStore` are each put
together from parts of one concept (principals, grants, leases, approvals, the decision
log) over their own database. Most :class:`~._store.AuthzStore` methods are then one call
to one part, the same on both; :class:`StoreParts` holds those calls once. What differs
(a check's snapshot, a commit with a state change, identifying a token, the clock) stays
on each store. The ``_*Part`` protocols say what a part must offer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from handrail.authz._models import ApprovalInfo, DecisionRecord, GrantInfo, LeaseInfo, Principal, PrincipalInfo
from handrail.authz._store import KeepRows


class _PrincipalsPart(Protocol):
    def add(self, name: str, role: str, token: str | None = None, expires_at_ms: int = 0) -> str: ...
    def all(self) -> list[tuple[str, str, int]]: ...
    def infos(self) -> list[PrincipalInfo]: ...
    def by_name(self, name: str) -> PrincipalInfo | None: ...
    def by_token(self, token: str) -> PrincipalInfo | None: ...
    def authenticate(self, token: str) -> Principal | None: ...
    def revoke(self, name: str) -> PrincipalInfo: ...
    def rotate(self, name: str, token: str | None = None, expires_at_ms: int = 0) -> tuple[PrincipalInfo, str]: ...


class _GrantsPart(Protocol):
    def add(self, grants: Iterable[GrantInfo], granted_by: str) -> list[GrantInfo]: ...
    def get(self, grant_id: str) -> GrantInfo: ...
    def revoke(self, grant_id: str) -> GrantInfo: ...
    def close_task(self, task_id: str) -> list[GrantInfo]: ...
    def query(self, principal: str = "", target: str = "", include_inactive: bool = False) -> list[GrantInfo]: ...
    def expiries(self) -> list[tuple[int, str]]: ...


class _LeasesPart(Protocol):
    def row(self, target: str) -> LeaseInfo | None: ...
    def get(self, target: str) -> LeaseInfo: ...
    def rows(self) -> list[LeaseInfo]: ...
    def change(self, target: str, transition: Callable[[LeaseInfo, int], LeaseInfo]) -> tuple[LeaseInfo, LeaseInfo]: ...


class _ApprovalsPart(Protocol):
    def latest(self, principal: str, target: str, fingerprint: str, epoch: int) -> ApprovalInfo | None: ...
    def get(self, approval_id: str) -> ApprovalInfo: ...
    def decide(self, approval_id: str, status: str, by: str, note: str) -> ApprovalInfo: ...
    def expire(self) -> list[ApprovalInfo]: ...
    def pending_deadlines(self) -> list[tuple[int, str]]: ...
    def query(
        self, status: str = "", principal: str = "", target: str = "", limit: int = 100
    ) -> list[ApprovalInfo]: ...


class _DecisionsPart(Protocol):
    def new_id(self) -> str: ...
    def record(self, record: DecisionRecord) -> None: ...
    def get(self, decision_id: str) -> DecisionRecord: ...
    def query(
        self, principal: str = "", target: str = "", reason: str = "", since_ms: int = 0, limit: int = 50
    ) -> list[DecisionRecord]: ...
    def count(self) -> int: ...

    prune_batch: int  # rows a prune deletes per transaction

    def top(self) -> int: ...
    def window(self, after: int, below: int, limit: int) -> list[tuple[int, int]]: ...
    def rows(self, after: int, upto: int, before_ms: int) -> list[tuple[Any, ...]]: ...
    def delete(self, after: int, upto: int, before_ms: int) -> int: ...
    def delete_seqs(self, seqs: list[int], before_ms: int) -> int: ...
    def drop_spent(self, before_ms: int) -> int: ...


class StoreParts:
    """The :class:`~._store.AuthzStore` methods that are one call to one part, for a
    store that sets the five parts below in its ``__init__``."""

    _principals: _PrincipalsPart
    _grants: _GrantsPart
    _leases: _LeasesPart
    _approvals: _ApprovalsPart
    _decisions: _DecisionsPart

    # --- principals ---------------------------------------------------------------------------

    def add_principal(self, name: str, role: str, token: str | None = None, expires_at_ms: int = 0) -> str:
        """See :meth:`AuthzStore.add_principal`."""
        return self._principals.add(name, role, token, expires_at_ms)

    def list_principals(self) -> list[tuple[str, str, int]]:
        """See :meth:`AuthzStore.list_principals`."""
        return self._principals.all()

    def principals(self) -> list[PrincipalInfo]:
        """See :meth:`AuthzStore.principals`."""
        return self._principals.infos()

    def principal(self, name: str) -> PrincipalInfo | None:
        """See :meth:`AuthzStore.principal`."""
        return self._principals.by_name(name)

    def token_owner(self, token: str) -> PrincipalInfo | None:
        """See :meth:`AuthzStore.token_owner`."""
        return self._principals.by_token(token)

    def authenticate(self, token: str) -> Principal | None:
        """See :meth:`AuthzStore.authenticate`."""
        return self._principals.authenticate(token)

    def revoke_principal(self, name: str) -> PrincipalInfo:
        """See :meth:`AuthzStore.revoke_principal`."""
        return self._principals.revoke(name)

    def rotate_token(self, name: str, token: str | None = None, expires_at_ms: int = 0) -> tuple[PrincipalInfo, str]:
        """See :meth:`AuthzStore.rotate_token`."""
        return self._principals.rotate(name, token, expires_at_ms)

    # --- grants -------------------------------------------------------------------------------

    def add_grant(self, grant: GrantInfo, granted_by: str) -> GrantInfo:
        """See :meth:`AuthzStore.add_grant` (through :meth:`add_grants`, which a store may extend)."""
        (stored,) = self.add_grants([grant], granted_by)
        return stored

    def add_grants(self, grants: list[GrantInfo], granted_by: str) -> list[GrantInfo]:
        """Store many grants in one transaction (benchmarks and imports)."""
        return self._grants.add(grants, granted_by)

    def get_grant(self, grant_id: str) -> GrantInfo:
        """See :meth:`AuthzStore.get_grant`."""
        return self._grants.get(grant_id)

    def revoke_grant(self, grant_id: str) -> GrantInfo:
        """See :meth:`AuthzStore.revoke_grant`."""
        return self._grants.revoke(grant_id)

    def close_task(self, task_id: str) -> list[GrantInfo]:
        """See :meth:`AuthzStore.close_task`."""
        return self._grants.close_task(task_id)

    def list_grants(self, principal: str = "", target: str = "", include_inactive: bool = False) -> list[GrantInfo]:
        """See :meth:`AuthzStore.list_grants`."""
        return self._grants.query(principal, target, include_inactive)

    def active_grant_expiries(self) -> list[tuple[int, str]]:
        """See :meth:`AuthzStore.active_grant_expiries`."""
        return self._grants.expiries()

    # --- leases -------------------------------------------------------------------------------

    def lease_row(self, target: str) -> LeaseInfo | None:
        """See :meth:`AuthzStore.lease_row`."""
        return self._leases.row(target)

    def get_lease(self, target: str) -> LeaseInfo:
        """See :meth:`AuthzStore.get_lease`."""
        return self._leases.get(target)

    def leases(self) -> list[LeaseInfo]:
        """See :meth:`AuthzStore.leases`."""
        return self._leases.rows()

    def change_lease(
        self, target: str, transition: Callable[[LeaseInfo, int], LeaseInfo]
    ) -> tuple[LeaseInfo, LeaseInfo]:
        """See :meth:`AuthzStore.change_lease`: a compare-and-set on the epoch."""
        return self._leases.change(target, transition)

    # --- the decision log ---------------------------------------------------------------------

    def new_decision_id(self) -> str:
        """See :meth:`AuthzStore.new_decision_id`."""
        return self._decisions.new_id()

    def record_decision(self, record: DecisionRecord) -> None:
        """See :meth:`AuthzStore.record_decision`."""
        self._decisions.record(record)

    def get_decision(self, decision_id: str) -> DecisionRecord:
        """See :meth:`AuthzStore.get_decision`."""
        return self._decisions.get(decision_id)

    def list_decisions(
        self,
        principal: str = "",
        target: str = "",
        reason: str = "",
        since_ms: int = 0,
        limit: int = 50,
    ) -> list[DecisionRecord]:
        """See :meth:`AuthzStore.list_decisions`."""
        return self._decisions.query(principal, target, reason, since_ms, limit)

    def count_decisions(self) -> int:
        """How many decisions the log holds."""
        return self._decisions.count()

    def prune_decisions(
        self, before_ms: int, *, dry_run: bool = False, batch: int = 0, keep: KeepRows | None = None
    ) -> int:
        """See :meth:`AuthzStore.prune_decisions`.

        The log is walked in order of its sequence numbers, ``batch`` rows at a time
        (default: the store's ``prune_batch``), each batch deleted in its own short
        transaction (a sidecar writing meanwhile waits for one batch, never for the whole
        prune). The walk stops at the first batch that holds no decision older than
        ``before_ms``: the log is in order of time but for the skew between replicas'
        commits, so what is left past that batch is newer (a straggler a few rows out of
        order is taken by the next prune). It never reaches the newest decision, nor any
        logged after the prune began.

        With ``keep``, a batch's rows are read and handed to it before any is deleted, and
        only those are deleted then (by sequence number, outside any transaction while
        ``keep`` writes): a slow archive holds no lock, and nothing it did not take goes.
        """
        parts = self._decisions
        batch = batch or parts.prune_batch
        top, after, pruned = parts.top(), 0, 0
        if not dry_run:
            parts.drop_spent(before_ms)  # the allows kept for a resend (_replay), of that time
        while True:
            rows = parts.window(after, top, batch)
            old = sum(1 for _, at_ms in rows if at_ms < before_ms)
            if not old:
                return pruned
            upto = rows[-1][0]
            if dry_run:
                pruned += old
            elif keep is None:
                pruned += parts.delete(after, upto, before_ms)
            else:  # kept (written and synced) first; then only what was kept is deleted
                rows = parts.rows(after, upto, before_ms)
                if rows:
                    keep(rows)
                    pruned += parts.delete_seqs([int(r[0]) for r in rows], before_ms)
            after = upto

    # --- approvals ----------------------------------------------------------------------------

    def latest_approval(self, principal: str, target: str, fingerprint: str, epoch: int) -> ApprovalInfo | None:
        """See :meth:`AuthzStore.latest_approval`."""
        return self._approvals.latest(principal, target, fingerprint, epoch)

    def get_approval(self, approval_id: str) -> ApprovalInfo:
        """See :meth:`AuthzStore.get_approval`."""
        return self._approvals.get(approval_id)

    def decide_approval(self, approval_id: str, status: str, by: str, note: str) -> ApprovalInfo:
        """See :meth:`AuthzStore.decide_approval`."""
        return self._approvals.decide(approval_id, status, by, note)

    def expire_approvals(self) -> list[ApprovalInfo]:
        """See :meth:`AuthzStore.expire_approvals`."""
        return self._approvals.expire()

    def pending_deadlines(self) -> list[tuple[int, str]]:
        """See :meth:`AuthzStore.pending_deadlines`."""
        return self._approvals.pending_deadlines()

    def list_approvals(
        self, status: str = "", principal: str = "", target: str = "", limit: int = 100
    ) -> list[ApprovalInfo]:
        """See :meth:`AuthzStore.list_approvals`."""
        return self._approvals.query(status, principal, target, limit)
