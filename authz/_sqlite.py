"""The SQLite implementation of :class:`~handrail.authz._store.AuthzStore`.

:class:`SqliteStore` is the one object the sidecar holds; it puts together parts of one
concept each, all over one :class:`~._sqlite_db.SqliteDatabase` (one file, one write lock,
one ``atomic()`` transaction):

* :class:`~._sqlite_migrations.Migrations`: the recorded, versioned schema;
* :class:`~._sqlite_principals.SqlitePrincipals`: names, roles, hashed tokens;
* :class:`~._sqlite_grants.SqliteGrants`: scope grants, and the index a check reads;
* :class:`~._sqlite_leases.SqliteLeases`: control leases, compare-and-set on the epoch;
* :class:`~._sqlite_approvals.SqliteApprovals`: operators' approvals of exact actions;
* :class:`~._sqlite_decisions.DecisionLog`: the decision log, its journal, and the
  :class:`~._sqlite_decisions.Checkpointer` thread.

The store's own code is what spans them: a check's snapshot, and a check that commits its
decision with the state change it rests on. What is durable when is told in
:mod:`handrail.authz._store`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from handrail.authz._errors import AuthzError
from handrail.authz._models import ApprovalInfo, DecisionRecord, GrantInfo, LeaseInfo, Principal, PrincipalInfo
from handrail.authz._sqlite_approvals import SqliteApprovals
from handrail.authz._sqlite_db import SqliteDatabase, wall_clock_ms
from handrail.authz._sqlite_decisions import Checkpointer, DecisionLog
from handrail.authz._sqlite_grants import SqliteGrants
from handrail.authz._sqlite_leases import SqliteLeases
from handrail.authz._sqlite_migrations import Migrations
from handrail.authz._sqlite_principals import SqlitePrincipals
from handrail.authz._sqlite_schema import DB_NAME
from handrail.authz._watch import EventHub


class SqliteStore:
    """The SQLite implementation of :class:`~handrail.authz.AuthzStore` (see the module
    docstring for its parts; each method below is that protocol's).

    Args:
        path: the SQLite file (created with its tables if missing).
        clock: returns unix milliseconds; defaults to the wall clock. Tests pass a fake.
        durable_decisions: fsync every decision-log insert.
        journal: log decisions through the journal (see :mod:`._sqlite_decisions`); only
            for the one process that serves the file (it replays journals left by a crash).

    Attributes:
        path: the SQLite file.
        db: its connections and write transaction (:class:`~._sqlite_db.SqliteDatabase`).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], int] | None = None,
        durable_decisions: bool = False,
        journal: bool = False,
    ) -> None:
        self._clock = clock or wall_clock_ms
        try:
            self.db = SqliteDatabase(path, self._clock)
        except sqlite3.Error as exc:
            raise AuthzError(f"cannot open {path}: {exc}", reason="STORE_UNAVAILABLE") from None
        self.path = self.db.path
        self._decisions = DecisionLog(self.db, durable=durable_decisions, journal=journal)
        self._migrations = Migrations()
        try:
            self.migrate()
            self._decisions.open()
        except (sqlite3.Error, OSError) as exc:
            self.db.close()
            raise AuthzError(f"cannot open {path}: {exc}", reason="STORE_UNAVAILABLE") from None
        self._principals = SqlitePrincipals(self.db)
        self._grants = SqliteGrants(self.db)
        self._leases = SqliteLeases(self.db)
        self._approvals = SqliteApprovals(self.db)
        self._leases.load()
        self._grants.load()
        self._checkpointer: Checkpointer | None = None
        self._hub: EventHub | None = None

    @classmethod
    def in_dir(cls, data_dir: str | Path, **kwargs: Any) -> SqliteStore:
        """Open (creating) ``authz.sqlite`` under ``data_dir``."""
        directory = Path(data_dir)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AuthzError(f"cannot create {directory}: {exc.strerror}", reason="STORE_UNAVAILABLE") from None
        return cls(directory / DB_NAME, **kwargs)

    # --- the file -----------------------------------------------------------------------------

    def now_ms(self) -> int:
        """The store's clock, in unix milliseconds; the only clock that judges expiry."""
        return self._clock()

    def event_hub(self) -> EventHub:
        """See :meth:`AuthzStore.event_hub`: in-process, numbered from the clock in µs."""
        if self._hub is None:
            self._hub = EventHub(self.now_ms() * 1000)
        return self._hub

    @contextmanager
    def atomic(self, conn: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``) under the store's write lock."""
        with self.db.atomic(conn) as c:
            yield c

    def migrate(self) -> list[int]:
        """Apply the migrations not yet recorded in ``migrations``; return their versions."""
        return self._migrations.apply(self.db)

    def start_checkpointer(self, interval_s: float = 0.5, flush_s: float = 0.02) -> None:
        """Move journal flushes and WAL checkpoints onto a thread (see
        :class:`~._sqlite_decisions.Checkpointer`); a second call does nothing."""
        if self._checkpointer is None:
            self._checkpointer = self._decisions.start_checkpointer(interval_s, flush_s)

    def close(self) -> None:
        """Flush the journal; close every connection this store opened (from any thread)."""
        if self._checkpointer is not None:
            self._checkpointer.stop()
        if not self.db.closed:
            self._decisions.close()
        self.db.close()
        self._principals.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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

    def principal_now(self, name: str) -> tuple[PrincipalInfo | None, int]:
        """See :meth:`AuthzStore.principal_now`."""
        return self._principals.by_name(name), self.now_ms()

    def identify(self, token: str) -> tuple[PrincipalInfo | None, int]:
        """See :meth:`AuthzStore.identify`."""
        return self._principals.by_token(token), self.now_ms()

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
        """See :meth:`AuthzStore.add_grant`."""
        (stored,) = self._grants.add((grant,), granted_by)
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

    def grants_for(self, principal: str, target: str) -> list[GrantInfo]:
        """See :meth:`AuthzStore.grants_for`."""
        return self._grants.covering(principal, target)

    def indexed_grant(self, grant_id: str) -> GrantInfo | None:
        """See :meth:`AuthzStore.indexed_grant`."""
        return self._grants.indexed(grant_id)

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
        """See :meth:`AuthzStore.change_lease`."""
        return self._leases.change(target, transition)

    # --- checks and the decision log ----------------------------------------------------------

    def check_snapshot(
        self, principal: str, target: str
    ) -> tuple[PrincipalInfo | None, LeaseInfo | None, list[GrantInfo], int]:
        """See :meth:`AuthzStore.check_snapshot`: read from memory, no SQL (the principal
        is a dictionary hit while no process changed a principal)."""
        agent = self._principals.by_name(principal)
        return agent, self._leases.row(target), self._grants.covering(principal, target), self._clock()

    def new_decision_id(self) -> str:
        """See :meth:`AuthzStore.new_decision_id`: 12 hex digits of log sequence, then 20
        random ones."""
        return self._decisions.new_id()

    def record_decision(self, record: DecisionRecord) -> None:
        """See :meth:`AuthzStore.record_decision` and :meth:`DecisionLog.record`."""
        self._decisions.record(record)

    def commit_check(
        self,
        record: DecisionRecord,
        *,
        consume: str = "",
        use_approval: str = "",
        new_approval: ApprovalInfo | None = None,
    ) -> bool:
        """See :meth:`AuthzStore.commit_check`: one ``synchronous=FULL`` transaction."""
        try:
            with self.db.atomic() as conn:
                now = record.at_ms
                if consume and not self._grants.consume(conn, consume, now):
                    raise _LostRace
                if use_approval and not self._approvals.use(conn, use_approval, record.decision_id, now):
                    raise _LostRace
                if new_approval is not None:
                    self._approvals.insert(conn, new_approval)
                self._decisions.insert(conn, record)
                if consume:
                    self._grants.index(self._grants.read(conn, consume))
        except _LostRace:
            return False
        except sqlite3.IntegrityError:
            if new_approval is None:
                raise
            return False  # another check created the pending approval first
        return True

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

    def flush_decisions(self) -> int:
        """Move journaled decisions into SQLite now; return how many."""
        return self._decisions.flush()

    def count_decisions(self) -> int:
        """How many decisions the log holds."""
        return self._decisions.count()

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


#: The name the foundation exported; the SQLite store.
Store = SqliteStore


class _LostRace(Exception):
    """A conditional update of :meth:`SqliteStore.commit_check` matched nothing."""
