r"""The sidecar's one storage seam: the :class:`AuthzStore` protocol.

The authorizer (and through it the servicer) uses the store through this protocol only,
and nothing in it is SQLite's: :class:`~handrail.authz.SqliteStore` implements it over one
SQLite file (:mod:`._sqlite`), and :class:`~handrail.authz.PgStore` over PostgreSQL for
several replicas (:mod:`._pg`: each lease change one compare-and-set statement, the
single-use consumption a conditional ``UPDATE``, expiry judged by the database's clock,
Watch fed by a change log). What only one backend has (SQLite's file, its migrations,
its checkpointer thread, bulk imports) stays on that backend's class.

What the protocol promises, whatever the backend:

* Every method that changes state has committed durably when it returns (grants, leases,
  approvals, principals, and a decision committed with :meth:`AuthzStore.commit_check`).
* Revocation and expiry act on the very next check: a check reads the current state (or an
  index the one writing process keeps coherent), never a cached decision, and expiry is
  judged against :meth:`AuthzStore.now_ms` at every check.
* A decision logged with :meth:`AuthzStore.record_decision` survives the sidecar being
  killed once the call returns; the last moments' decisions may be lost to power loss.

SQLite specifics (:class:`~handrail.authz.SqliteStore`):

* The file is the truth. Every change is committed (``BEGIN IMMEDIATE``,
  ``synchronous=FULL``) before the call returns, and only then applied to in-memory indexes
  of grants, leases and principals that make a check cheap. Only the sidecar process writes
  grants, leases and approvals (``serve`` holds a lock file), so the indexes stay coherent.
* All writes go through one lock: SQLite has one writer anyway, and waiting on a Python lock
  costs microseconds where SQLite's busy handler sleeps milliseconds.
* The decision log: when the sidecar answers a check, its decision has been copied into a
  memory-mapped journal file next to the database (the page cache, with no system call:
  it survives ``kill -9`` of the sidecar, as a WAL commit with ``synchronous=NORMAL`` would;
  see :mod:`._journal`) and a background thread moves journaled decisions into SQLite every
  20 ms, in one transaction, and deletes full journals; a restart replays any journal a
  crash left. Power loss or an OS crash may lose the last decisions;
  ``durable_decisions=True`` inserts and fsyncs each one instead. A check that changes
  state (consumes a single-use grant, creates or uses an approval) commits its decision in
  the same ``synchronous=FULL`` transaction as the change (:mod:`._sqlite_decisions`).
* WAL checkpoints run on that background thread too, never inside a check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from handrail.authz._models import (
    ApprovalInfo,
    DecisionRecord,
    GrantInfo,
    LeaseInfo,
    Principal,
    PrincipalInfo,
    Spent,
)
from handrail.authz._watch import EventHub

#: What a prune hands each batch's rows to before deleting them (an archive's writer).
KeepRows = Callable[[list[tuple[Any, ...]]], None]


class CheckSnapshot(NamedTuple):
    """What one check reads, at one moment (one statement on PostgreSQL).

    Attributes:
        caller: the principal the caller's bearer token names, whatever its state (None:
            no token was given, or it names nobody).
        agent: the principal the check acts for (None: unknown).
        lease: the target's lease row (None: never leased).
        grants: the agent's grants whose target is or covers the check's, oldest first.
        now: the store's clock.
        stamp: None for a snapshot read just now; for one the store remembered from an
            earlier read (:meth:`AuthzStore.check_snapshot` with ``recent``), what
            :meth:`AuthzStore.record_checked` needs to tell whether it is still current
            (opaque to all but the store that made it).
    """

    caller: PrincipalInfo | None
    agent: PrincipalInfo | None
    lease: LeaseInfo | None
    grants: list[GrantInfo]
    now: int
    stamp: object = None


class AuthzStore(Protocol):
    """What the sidecar needs from its storage: SQLite for one sidecar, PostgreSQL for replicas.

    Every method that changes state has committed durably when it returns. Expiry is judged
    by :meth:`now_ms` only. Lookups of one thing by id raise :class:`NotFoundError`; bad
    arguments raise :class:`InvalidArgumentError` naming the field.
    """

    def now_ms(self) -> int:
        """The store's clock (unix ms); the only clock that judges expiry."""

    def clock_bound_ms(self) -> int | None:
        """A time :meth:`now_ms` has certainly not passed yet, known without asking the
        database (None: ask :meth:`now_ms`). Lets the sidecar's expiry tick leave the
        database alone while nothing it waits for can have come due."""

    def close(self) -> None:
        """Release every resource."""

    def event_hub(self) -> EventHub:
        """The hub Watch streams are fed from: in-process for one sidecar, fed by every
        replica's changes for a shared store (the same object on every call)."""

    # principals
    def add_principal(self, name: str, role: str, token: str | None = None, expires_at_ms: int = 0) -> str:
        """Create a principal; return its bearer token."""

    def list_principals(self) -> list[tuple[str, str, int]]:
        """Every principal as ``(name, role, created_at_ms)``."""

    def principals(self) -> list[PrincipalInfo]:
        """Every principal, by name."""

    def principal(self, name: str) -> PrincipalInfo | None:
        """The principal called ``name`` as it stands now (whatever its state), or None."""

    def token_owner(self, token: str) -> PrincipalInfo | None:
        """The principal a bearer token names as it stands now (whatever its state), or None."""

    def principal_now(self, name: str) -> tuple[PrincipalInfo | None, int]:
        """:meth:`principal` and :meth:`now_ms` read together (one round trip for a store
        behind a network)."""

    def identify(self, token: str) -> tuple[PrincipalInfo | None, int]:
        """:meth:`token_owner` and :meth:`now_ms` read together (one round trip for a store
        behind a network)."""

    def authenticate(self, token: str) -> Principal | None:
        """The live principal a bearer token names, or None (unknown, revoked, expired)."""

    def revoke_principal(self, name: str) -> PrincipalInfo:
        """Revoke a principal: its token stops authenticating at once (NotFoundError)."""

    def rotate_token(self, name: str, token: str | None = None, expires_at_ms: int = 0) -> tuple[PrincipalInfo, str]:
        """Give a principal a new token (the old one stops at once); (principal, token)."""

    # grants
    def add_grant(self, grant: GrantInfo, granted_by: str) -> GrantInfo:
        """Validate and store a new grant."""

    def get_grant(self, grant_id: str) -> GrantInfo:
        """One grant by id (NotFoundError)."""

    def revoke_grant(self, grant_id: str) -> GrantInfo:
        """Revoke a grant (idempotent)."""

    def close_task(self, task_id: str) -> list[GrantInfo]:
        """End every open grant bound to ``task_id``; return them."""

    def list_grants(self, principal: str = "", target: str = "", include_inactive: bool = False) -> list[GrantInfo]:
        """Grants, oldest first, optionally filtered."""

    def grants_for(self, principal: str, target: str) -> list[GrantInfo]:
        """The grants of ``principal`` whose target is or covers ``target``, oldest first."""

    def indexed_grant(self, grant_id: str) -> GrantInfo | None:
        """The grant as the store last saw it change, without a read if it can (None when it
        does not know the grant: it ended long ago, or never was)."""

    def active_grant_expiries(self) -> list[tuple[int, str]]:
        """``(expires_at_ms, grant_id)`` of every active grant that expires (for Watch)."""

    # leases
    def lease_row(self, target: str) -> LeaseInfo | None:
        """The stored lease row of ``target`` (a lapsed lease still shows its holder)."""

    def get_lease(self, target: str) -> LeaseInfo:
        """The lease of ``target`` as it stands now (a lapsed lease shows as free)."""

    def leases(self) -> list[LeaseInfo]:
        """Every lease row."""

    def change_lease(
        self, target: str, transition: Callable[[LeaseInfo, int], LeaseInfo]
    ) -> tuple[LeaseInfo, LeaseInfo]:
        """Apply a transition atomically (compare-and-set on the epoch); (before, after)."""

    # checks and the decision log
    def check_snapshot(self, principal: str, target: str, token: str = "", *, recent: bool = False) -> CheckSnapshot:
        """The principal ``token`` names (when given), the principal acted for, the lease
        row, the candidate grants and the clock, for one check: one read for a store behind
        a network, so that authenticating the caller costs no round trip of its own.

        ``recent``: the store may answer from a snapshot it read earlier for the same
        principal, target and token (its ``stamp`` set, ``now`` the clock's value now). A
        decision made on it is recorded only through :meth:`record_checked`, which appends
        it only if that snapshot is still what the store holds; a decision that changes
        state (:meth:`commit_check`) is made on a fresh read."""

    def record_decision(self, record: DecisionRecord) -> None:
        """Append one decision to the log."""

    def record_checked(self, record: DecisionRecord, snapshot: CheckSnapshot) -> bool:
        """Append the decision made on ``snapshot``. For a remembered snapshot (``stamp``
        set), only if every row it read is unchanged and no expiry, creation or end among
        them falls between the ``now`` it was judged at and the store's clock (one statement
        on PostgreSQL); False when not (nothing is appended: decide again on a fresh read)."""

    def commit_check(
        self,
        record: DecisionRecord,
        *,
        consume: str = "",
        use_approval: str = "",
        new_approval: ApprovalInfo | None = None,
        spent: Spent | None = None,
    ) -> bool:
        """Log a decision together with the state change it rests on, in one transaction;
        ``spent``: keep it for a resend of the same request (:mod:`._replay`).

        Returns False (and changes nothing) when the change lost a race: the grant was
        consumed or ended, the approval is no longer APPROVED, a pending approval for the
        same action already exists, or an allow of the same request (``spent.key``) was
        committed first. The caller decides again.
        """

    def spent_by(self, key: str, since_ms: int) -> Spent | None:
        """The allow committed with ``spent.key == key`` at or after ``since_ms``, or None.
        It sees every commit that changed what a snapshot read before the call sees (the
        consumption and its :class:`Spent` are one transaction)."""

    def get_decision(self, decision_id: str) -> DecisionRecord:
        """One logged decision (NotFoundError)."""

    def new_decision_id(self) -> str:
        """A fresh, unique decision id."""

    def list_decisions(
        self,
        principal: str = "",
        target: str = "",
        reason: str = "",
        since_ms: int = 0,
        limit: int = 50,
    ) -> list[DecisionRecord]:
        """Logged decisions, newest first."""

    def prune_decisions(
        self, before_ms: int, *, dry_run: bool = False, batch: int = 0, keep: KeepRows | None = None
    ) -> int:
        """Delete the decisions logged before ``before_ms`` (a retention window; never the
        newest decision, so the log's sequence keeps counting up), and the kept allows
        (:meth:`spent_by`) of that time, ``batch`` rows per
        transaction (0: the store's own size); how many. ``dry_run``: count them, delete
        nothing. ``keep``: called with each batch's rows (``seq`` and
        :data:`DECISION_COLS <handrail.authz._sqlite_schema.DECISION_COLS>`) before they
        are deleted; only what it was handed is deleted, and if it raises, that batch stays."""

    # approvals
    def latest_approval(self, principal: str, target: str, fingerprint: str, epoch: int) -> ApprovalInfo | None:
        """The newest approval bound to this exact action under this epoch."""

    def get_approval(self, approval_id: str) -> ApprovalInfo:
        """One approval (NotFoundError); a pending one past its deadline reads EXPIRED."""

    def decide_approval(self, approval_id: str, status: str, by: str, note: str) -> ApprovalInfo:
        """Approve or deny a pending approval (LeaseConflictError when it is not pending)."""

    def expire_approvals(self) -> list[ApprovalInfo]:
        """Mark pending approvals past their deadline EXPIRED; return them."""

    def pending_deadlines(self) -> list[tuple[int, str]]:
        """``(deadline_ms, approval_id)`` of every pending approval (for Watch)."""

    def list_approvals(
        self, status: str = "", principal: str = "", target: str = "", limit: int = 100
    ) -> list[ApprovalInfo]:
        """Approvals, newest first, optionally filtered (status as of now)."""
