"""The PostgreSQL implementation of :class:`~handrail.authz._store.AuthzStore`: sidecar
replicas over one database.

:class:`PgStore` puts together parts of one concept each over one
:class:`~._pg_db.PgDatabase` (a connection pool, the database's clock, psycopg's errors
mapped at one edge, recorded migrations):

* :class:`~._pg_principals.PgPrincipals` and :class:`~._pg_grants.PgGrants`: principals and
  scope grants, read at every call (no index, no token cache: see below);
* :class:`~._pg_leases.PgLeases`: control leases, one compare-and-set statement per change;
* :class:`~._pg_approvals.PgApprovals`: approvals, changed under row locks;
* :class:`~._pg_approvals.PgDecisions`: the decision log;
* :class:`~._pg_watch.SharedEventHub` (from :meth:`PgStore.event_hub`): Watch across
  replicas through a change log and LISTEN/NOTIFY.

The protocol methods that are one call to one part come from
:class:`~._store_parts.StoreParts` (shared with the SQLite store); those below are this
store's own.

**What SQLite caches, and what this store does instead.** The SQLite store keeps in memory
the grant index, the lease rows, the known tokens and the next decision number; it may,
because one process writes its file. Here several replicas write, so none of it is kept:

* grant index and lease rows: a check reads the lease row, its candidate grants and the
  database's clock in one statement (:meth:`PgGrants.snapshot`), so a revocation, a
  consumption, a closed task, a takeover or an expiry committed through any replica acts
  on the very next check through any other;
* what a replica does remember: the last snapshot it read for each (agent, target,
  caller), with the place (``ctid``) and version (``xmin``) of its caller's, agent's and
  lease's rows; a write to the grants table writes the row of each principal whose grants
  it touched (a trigger), so the agent's row version covers its grants. The next check
  for the same keys is decided on it, and its decision is inserted by one statement whose
  ``WHERE`` reads those rows again (:func:`~._pg_grants.still_current`): the same row
  versions at the same places (one page each, no index), a row that was missing still
  missing, and the database's clock on the same side of every time-stamp among them as
  the clock the decision was judged at (within 50 ms of it). If anything changed, nothing
  is inserted and the check is decided again on a fresh read, as a lost race is; a
  decision that changes state (a single-use grant, an approval) and a refusal of the
  caller or the agent are always made on a fresh read. So the common check is one round
  trip, and it still acts on every change committed before its statement;
* known tokens and principals: dropped. SQLite forgets them when a stamp file beside its
  database moves, which only processes on its host share; here a revocation, a rotation
  or an expiry made through any replica must act on the next call to every other, so
  each call reads its token's principal and the database's clock in one statement
  (:meth:`~._pg_principals.PgPrincipals.identify`);
* the decision number: decision ids are random; the log orders by a sequence.

A replica keeps only what its Watch streams have been sent (the hub's
last sequence number), which the change log makes good after any reconnect.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from handrail.authz import _deadline as deadline
from handrail.authz._models import ApprovalInfo, DecisionRecord, GrantInfo, LeaseInfo, PrincipalInfo, Spent
from handrail.authz._pg_approvals import PgApprovals, PgDecisions, conditional_insert
from handrail.authz._pg_db import PgDatabase, describe
from handrail.authz._pg_grants import PgGrants, Reading, still_current
from handrail.authz._pg_leases import PgLeases
from handrail.authz._pg_principals import PgPrincipals
from handrail.authz._pg_schema import MIGRATIONS
from handrail.authz._pg_watch import SharedEventHub
from handrail.authz._sqlite_schema import hash_token
from handrail.authz._store import CheckSnapshot
from handrail.authz._store_parts import StoreParts
from handrail.authz._watch import EventHub


def channel_for(schema: str) -> str:
    """The NOTIFY channel of the replicas serving ``schema``: ``handrail_authz_<schema>``, or
    for a schema whose name would not make a plain identifier of at most 63 bytes (a longer
    channel is refused by ``pg_notify`` and cut short by ``LISTEN``), the same prefix and a
    digest of the name."""
    plain = f"handrail_authz_{schema}"
    if _PLAIN.fullmatch(schema) and len(plain) <= 63:
        return plain
    return "handrail_authz_" + hashlib.sha256(schema.encode()).hexdigest()[:40]


_PLAIN = re.compile(r"[A-Za-z0-9_]+")


class PgStore(StoreParts):
    """The PostgreSQL implementation of :class:`~handrail.authz.AuthzStore` (see the module
    docstring for its parts; each method below is that protocol's). Any number of sidecar
    replicas may serve one database.

    Args:
        dsn: a ``postgresql://`` URL or libpq connection string. The tables live in the
            first schema of its ``search_path``, which must exist (the migrations create
            the tables, not the schema: a missing one is refused at start in one line).
        clock: a test clock (unix ms) that stands in for the database's; None in service.
        durable_decisions: commit each decision synchronously (otherwise a plain decision's
            commit does not wait for the database's disk: see :mod:`._pg_approvals`).
        pool_size: the most connections this replica opens for requests (one more listens).

    Attributes:
        db: the pool and clock state changes go through.
    """

    _principals: PgPrincipals
    _grants: PgGrants
    _leases: PgLeases
    _approvals: PgApprovals
    _decisions: PgDecisions

    def __init__(
        self,
        dsn: str,
        *,
        clock: Callable[[], int] | None = None,
        durable_decisions: bool = False,
        pool_size: int = 16,
    ) -> None:
        self.dsn = dsn
        self.db = PgDatabase(dsn, clock, min_size=min(2, pool_size), max_size=pool_size)
        try:
            self.migrate()
            self._log_db = (
                self.db
                if durable_decisions
                else PgDatabase(dsn, clock, min_size=1, max_size=pool_size, synchronous_commit="off", name="decisions")
            )
        except BaseException:
            self.db.close()
            raise
        self._principals = PgPrincipals(self.db)
        self._grants = PgGrants(self.db)
        self._leases = PgLeases(self.db)
        self._approvals = PgApprovals(self.db)
        self._decisions = PgDecisions(self.db, self._log_db)
        self._hub: SharedEventHub | None = None
        self._recent: dict[tuple[str, str, str], CheckSnapshot] = {}
        self._recent_lock = threading.Lock()

    @property
    def location(self) -> str:
        """The database, without its password."""
        return describe(self.dsn)

    def migrate(self) -> list[int]:
        """Apply the migrations not yet recorded; return their versions."""
        return self.db.migrate(MIGRATIONS)

    def now_ms(self) -> int:
        """See :meth:`AuthzStore.now_ms`: the database server's clock."""
        return self.db.now_ms()

    def clock_bound_ms(self) -> int | None:
        """See :meth:`AuthzStore.clock_bound_ms` and :meth:`PgDatabase.clock_bound_ms`."""
        return self.db.clock_bound_ms()

    def event_hub(self) -> EventHub:
        """See :meth:`AuthzStore.event_hub`: a hub fed by the change log of every replica."""
        if self._hub is None:
            self._hub = SharedEventHub(self.db, channel_for(self.db.schema))
        return self._hub

    def close(self) -> None:
        """Stop the listener and close the pools."""
        if self._hub is not None:
            self._hub.close()
        if self._log_db is not self.db:
            self._log_db.close()
        self.db.close()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- identity -----------------------------------------------------------------------------

    def principal_now(self, name: str) -> tuple[PrincipalInfo | None, int]:
        """See :meth:`AuthzStore.principal_now`: one statement."""
        return self._principals.by_name_now(name)

    def identify(self, token: str) -> tuple[PrincipalInfo | None, int]:
        """See :meth:`AuthzStore.identify`: one statement."""
        return self._principals.identify(token)

    # --- grants -------------------------------------------------------------------------------

    def grants_for(self, principal: str, target: str) -> list[GrantInfo]:
        """See :meth:`AuthzStore.grants_for`."""
        return self._grants.snapshot(principal, target).grants

    def indexed_grant(self, grant_id: str) -> GrantInfo | None:
        """See :meth:`AuthzStore.indexed_grant`: there is no index here, so a read."""
        return self._grants.find(grant_id)

    # --- checks and the decision log ----------------------------------------------------------

    def check_snapshot(self, principal: str, target: str, token: str = "", *, recent: bool = False) -> CheckSnapshot:
        """See :meth:`AuthzStore.check_snapshot`: one statement, the database's clock; with
        ``recent``, the last one read for the same keys when there is one (no statement;
        ``now`` is its clock moved on by this host's monotonic clock)."""
        key = (principal, target, hash_token(token) if token else "")
        if recent:
            known = self._recent.get(key)
            if known is not None:
                reading = known.stamp
                assert isinstance(reading, Reading)
                now = self.db.now()
                if now is None:
                    now = known.now + int((time.monotonic() - reading.at) * 1000)
                return known._replace(now=now)
        snapshot = self._grants.snapshot(principal, target, token)
        with self._recent_lock:
            self._recent.pop(key, None)
            self._recent[key] = snapshot
            if len(self._recent) > _RECENT_MAX:
                del self._recent[next(iter(self._recent))]
        return snapshot._replace(stamp=None)

    # Changes made through this replica drop what it remembers of the rows they touch, so
    # that the next check reads afresh (two statements) rather than deciding on the old
    # snapshot, failing its conditional insert and then reading (three): an executor's
    # lease renewal, every few seconds, is the common one. A change through another replica
    # is still caught by that insert.

    def change_lease(
        self, target: str, transition: Callable[[LeaseInfo, int], LeaseInfo]
    ) -> tuple[LeaseInfo, LeaseInfo]:
        """See :meth:`AuthzStore.change_lease`; forgets the snapshots of ``target``."""
        try:
            return super().change_lease(target, transition)
        finally:
            self._forget(lambda key: key[1] == target)

    def add_grants(self, grants: list[GrantInfo], granted_by: str) -> list[GrantInfo]:
        """See :meth:`StoreParts.add_grants`; forgets the snapshots of their principals."""
        try:
            return super().add_grants(grants, granted_by)
        finally:
            principals = {g.principal for g in grants}
            self._forget(lambda key: key[0] in principals)

    def revoke_grant(self, grant_id: str) -> GrantInfo:
        """See :meth:`AuthzStore.revoke_grant`; forgets the snapshots of its principal."""
        revoked = super().revoke_grant(grant_id)
        self._forget(lambda key: key[0] == revoked.principal)
        return revoked

    def close_task(self, task_id: str) -> list[GrantInfo]:
        """See :meth:`AuthzStore.close_task`; forgets the snapshots of its principals."""
        closed = super().close_task(task_id)
        principals = {g.principal for g in closed}
        self._forget(lambda key: key[0] in principals)
        return closed

    def revoke_principal(self, name: str) -> PrincipalInfo:
        """See :meth:`AuthzStore.revoke_principal`; forgets every snapshot (a caller's
        snapshot is kept by its token's digest, not its name)."""
        try:
            revoked = super().revoke_principal(name)
            deadline.changed()
            return revoked
        finally:
            self._forget(lambda _key: True)

    def rotate_token(self, name: str, token: str | None = None, expires_at_ms: int = 0) -> tuple[PrincipalInfo, str]:
        """See :meth:`AuthzStore.rotate_token`; forgets every snapshot."""
        try:
            rotated = super().rotate_token(name, token, expires_at_ms)
            deadline.changed()
            return rotated
        finally:
            self._forget(lambda _key: True)

    def _forget(self, drop: Callable[[tuple[str, str, str]], bool]) -> None:
        with self._recent_lock:
            for key in [k for k in self._recent if drop(k)]:
                del self._recent[key]

    def record_checked(self, record: DecisionRecord, snapshot: CheckSnapshot) -> bool:
        """See :meth:`AuthzStore.record_checked`: for a remembered snapshot, one statement
        that inserts the decision only where :func:`~._pg_grants.still_current` holds."""
        reading = snapshot.stamp
        if reading is None:
            self._decisions.record(record)
            return True
        assert isinstance(reading, Reading)
        return self._decisions.record_if(record, _RECORD_IF_CURRENT[reading.shape], reading.params(snapshot.now))

    def commit_check(
        self,
        record: DecisionRecord,
        *,
        consume: str = "",
        use_approval: str = "",
        new_approval: ApprovalInfo | None = None,
        spent: Spent | None = None,
    ) -> bool:
        """See :meth:`AuthzStore.commit_check`: one transaction, row locks, the database's
        clock. A grant consumed writes its agent's row (migration 3), so this replica
        forgets what it remembers of the agent, as for any grant change made through it."""
        now = self.db.now()

        def work(conn: psycopg.Connection[Any]) -> bool:
            try:
                with conn.transaction():
                    # a row lock waited on past the caller's deadline rolls it all back:
                    # no grant is consumed, no approval used, for a caller that has gone
                    PgDatabase.bound(conn)
                    if consume and PgGrants.consume(conn, consume, now) is None:
                        raise _LostRace
                    if use_approval and not PgApprovals.use(conn, use_approval, record.decision_id, now):
                        raise _LostRace
                    if spent is not None and not PgDecisions.keep_spent(conn, spent):
                        raise _LostRace  # an allow of the same request committed first
                    if new_approval is not None:
                        PgApprovals.insert(conn, new_approval)
                    PgDecisions.insert(conn, record)
            except _LostRace:
                return False
            except psycopg.errors.UniqueViolation:
                if new_approval is None:
                    raise
                return False  # another check created the pending approval first
            return True

        try:
            committed = self.db.run(work, what="the check's commit")
            if committed:
                deadline.changed()  # publishing the consumption must not be cut short
            return committed
        finally:
            if consume:
                agent = record.request.principal
                self._forget(lambda key: key[0] == agent)

    def spent_by(self, key: str, since_ms: int) -> Spent | None:
        """See :meth:`AuthzStore.spent_by`: one statement."""
        return self._decisions.spent_by(key, since_ms)


#: The decision insert of a check on a remembered snapshot.
_RECORD_IF_CURRENT = {
    (t, p, lease): conditional_insert(
        f"handrail_record_decision_if_current_{t:d}{p:d}{lease:d}", still_current((t, p, lease))
    )
    for t, p, lease in itertools.product((True, False), repeat=3)
}

#: How many snapshots a replica remembers (one per principal, target and token checked).
_RECENT_MAX = 4096


class _LostRace(Exception):
    """A conditional update of :meth:`PgStore.commit_check` matched nothing."""
