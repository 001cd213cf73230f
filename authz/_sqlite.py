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

The protocol methods that are one call to one part come from
:class:`~._store_parts.StoreParts` (shared with the PostgreSQL store). The store's own
code is what spans them: a check's snapshot, and a check that commits its
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
from handrail.authz._models import ApprovalInfo, DecisionRecord, GrantInfo, PrincipalInfo, Spent
from handrail.authz._sqlite_approvals import SqliteApprovals
from handrail.authz._sqlite_db import SqliteDatabase, wall_clock_ms
from handrail.authz._sqlite_decisions import Checkpointer, DecisionLog
from handrail.authz._sqlite_grants import SqliteGrants
from handrail.authz._sqlite_leases import SqliteLeases
from handrail.authz._sqlite_migrations import Migrations
from handrail.authz._sqlite_principals import SqlitePrincipals
from handrail.authz._sqlite_schema import DB_NAME
from handrail.authz._store import CheckSnapshot
from handrail.authz._store_parts import StoreParts
from handrail.authz._watch import EventHub


class SqliteStore(StoreParts):
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

    _principals: SqlitePrincipals
    _grants: SqliteGrants
    _leases: SqliteLeases
    _approvals: SqliteApprovals
    _decisions: DecisionLog

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

    def clock_bound_ms(self) -> int | None:
        """See :meth:`AuthzStore.clock_bound_ms`: None (this clock costs nothing to read)."""
        return None

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

    # --- identity -----------------------------------------------------------------------------

    def principal_now(self, name: str) -> tuple[PrincipalInfo | None, int]:
        """See :meth:`AuthzStore.principal_now`."""
        return self._principals.by_name(name), self.now_ms()

    def identify(self, token: str) -> tuple[PrincipalInfo | None, int]:
        """See :meth:`AuthzStore.identify`."""
        return self._principals.by_token(token), self.now_ms()

    # --- grants -------------------------------------------------------------------------------

    def grants_for(self, principal: str, target: str) -> list[GrantInfo]:
        """See :meth:`AuthzStore.grants_for`."""
        return self._grants.covering(principal, target)

    def indexed_grant(self, grant_id: str) -> GrantInfo | None:
        """See :meth:`AuthzStore.indexed_grant`."""
        return self._grants.indexed(grant_id)

    # --- checks and the decision log ----------------------------------------------------------

    def check_snapshot(self, principal: str, target: str, token: str = "", *, recent: bool = False) -> CheckSnapshot:
        """See :meth:`AuthzStore.check_snapshot`: read from memory, no SQL (a principal is
        a dictionary hit while no process changed a principal), so always fresh."""
        principals = self._principals
        version = principals.version()  # read once for both lookups
        caller = principals.by_token(token, version) if token else None
        agent = principals.by_name(principal, version)
        return CheckSnapshot(
            caller, agent, self._leases.row(target), self._grants.covering(principal, target), self._clock()
        )

    def record_checked(self, record: DecisionRecord, snapshot: CheckSnapshot) -> bool:
        """See :meth:`AuthzStore.record_checked`: this store's snapshots are always fresh."""
        self._decisions.record(record)
        return True

    def commit_check(
        self,
        record: DecisionRecord,
        *,
        consume: str = "",
        use_approval: str = "",
        new_approval: ApprovalInfo | None = None,
        spent: Spent | None = None,
    ) -> bool:
        """See :meth:`AuthzStore.commit_check`: one ``synchronous=FULL`` transaction."""
        try:
            with self.db.atomic(what="the check's commit") as conn:
                now = record.at_ms
                if consume and not self._grants.consume(conn, consume, now):
                    raise _LostRace
                if use_approval and not self._approvals.use(conn, use_approval, record.decision_id, now):
                    raise _LostRace
                if spent is not None and not self._decisions.keep_spent(conn, spent):
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

    def spent_by(self, key: str, since_ms: int) -> Spent | None:
        """See :meth:`AuthzStore.spent_by`."""
        return self._decisions.spent_by(key, since_ms)

    def flush_decisions(self) -> int:
        """Move journaled decisions into SQLite now; return how many."""
        return self._decisions.flush()


#: The name the foundation exported; the SQLite store.
Store = SqliteStore


class _LostRace(Exception):
    """A conditional update of :meth:`SqliteStore.commit_check` matched nothing."""
