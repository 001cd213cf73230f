"""Control leases over PostgreSQL: one compare-and-set statement per change, judged by the
database's clock.

Acquire, renew, release, take-over (and a person at the desk), hand-back and expire are
each ONE statement on the row that carries the epoch (``INSERT ... ON CONFLICT DO UPDATE
... WHERE`` or ``UPDATE ... WHERE``): the condition of the transition of :mod:`._core` is
the statement's ``WHERE``, "now" is the server's clock read inside it (:data:`._pg_db.NOW`),
and the row remembers what it replaced (``prev_*``), so the statement returns the lease
before and after without a second read. Concurrent statements on one target queue on its
row lock; each re-evaluates its ``WHERE`` on the row the previous one committed, so two
replicas can never both win an acquire, and a takeover always lands on the newest epoch.

When a statement changes no row, the row is read (one more statement) and the pure
transition is run on it at the same clock: it raises the :class:`LeaseConflictError` that
explains the refusal, or returns the row unchanged (a no-op, such as expiring a lapsed
lease), or — the row changed in between — the statement is tried again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from handrail.authz import _deadline as deadline
from handrail.authz._core import check_text
from handrail.authz._errors import LeaseConflictError
from handrail.authz._lease_changes import Acquire, Expire, HandBack, Release, Renew, TakeOver
from handrail.authz._models import LeaseInfo
from handrail.authz._pg_db import NOW, PgDatabase
from handrail.authz._pg_schema import LEASE_COLS, PREV_LEASE_COLS
from handrail.authz._sqlite_schema import lease_row

_RETURNING = f"RETURNING {LEASE_COLS}, {PREV_LEASE_COLS.replace('target, ', '')}, updated_at_ms"
_INSERT = (
    "INSERT INTO leases AS l (target, holder_kind, holder, epoch, expires_at_ms, next_holder, updated_at_ms)"
    " SELECT %(target)s, {kind}, {holder}, {epoch}, {expires}, {next}, c.now FROM (SELECT " + NOW + " AS now) AS c"
)
_LIVE = "(l.holder_kind <> '' AND l.expires_at_ms > EXCLUDED.updated_at_ms)"
_KEEP_PREV = (
    "prev_holder_kind = l.holder_kind, prev_holder = l.holder, prev_epoch = l.epoch,"
    " prev_expires_at_ms = l.expires_at_ms, prev_next_holder = l.next_holder,"
    " updated_at_ms = EXCLUDED.updated_at_ms"
)

# An agent takes a free, lapsed or handed-back (to it) lease, or renews its own live one.
ACQUIRE = (
    _INSERT.format(kind="'agent'", holder="%(holder)s", epoch="1", expires="c.now + %(ttl)s", next="''")
    + " ON CONFLICT (target) DO UPDATE SET "
    + _KEEP_PREV
    + ", epoch = CASE WHEN {own} THEN l.epoch ELSE l.epoch + 1 END,"
    " holder_kind = 'agent', holder = EXCLUDED.holder, expires_at_ms = EXCLUDED.expires_at_ms,"
    " next_holder = CASE WHEN {own} THEN l.next_holder ELSE '' END"
    " WHERE {own} OR (NOT " + _LIVE + " AND l.next_holder IN ('', EXCLUDED.holder)) "
).format(own=f"({_LIVE} AND l.holder_kind = 'agent' AND l.holder = EXCLUDED.holder)") + _RETURNING

_UPDATE = "UPDATE leases AS l SET " + _KEEP_PREV.replace("EXCLUDED.updated_at_ms", "c.now") + ", {set} FROM (SELECT "
_UPDATE += (
    NOW
    + " AS now) AS c WHERE l.target = %(target)s AND {where} "
    + _RETURNING.replace("updated_at_ms", "l.updated_at_ms")
)

# The holding agent extends its live lease at its epoch.
RENEW = _UPDATE.format(
    set="expires_at_ms = c.now + %(ttl)s",
    where="l.holder_kind = 'agent' AND l.holder = %(holder)s AND l.epoch = %(epoch)s AND l.expires_at_ms > c.now",
)

# The holding agent gives its lease up at its epoch (even lapsed, as in _core); the epoch moves.
RELEASE = _UPDATE.format(
    set="holder_kind = '', holder = '', epoch = l.epoch + 1, expires_at_ms = 0, next_holder = ''",
    where="l.holder_kind = 'agent' AND l.holder = %(holder)s AND l.epoch = %(epoch)s",
)

# A person takes control: always. The same person holding it live only extends it.
TAKE_OVER = (
    _INSERT.format(kind="'human'", holder="%(holder)s", epoch="1", expires="c.now + %(ttl)s", next="''")
    + " ON CONFLICT (target) DO UPDATE SET "
    + _KEEP_PREV
    + ", epoch = CASE WHEN {same} THEN l.epoch ELSE l.epoch + 1 END,"
    " holder_kind = 'human', holder = EXCLUDED.holder, expires_at_ms = EXCLUDED.expires_at_ms,"
    " next_holder = '' "
).format(same=f"({_LIVE} AND l.holder_kind = 'human' AND l.holder = EXCLUDED.holder)") + _RETURNING

# An operator frees the lease at its epoch, maybe for one agent.
HAND_BACK = _UPDATE.format(
    set="holder_kind = '', holder = '', epoch = l.epoch + 1, expires_at_ms = 0, next_holder = %(next)s",
    where="l.epoch = %(epoch)s",
)

# ... and a target never leased is at epoch 0: the row is made (a row at epoch 0 never exists).
HAND_BACK_NEW = (
    _INSERT.format(kind="''", holder="''", epoch="1", expires="0", next="%(next)s")
    + " ON CONFLICT (target) DO NOTHING "
    + _RETURNING.replace("prev_", "l.prev_").replace("updated_at_ms", "l.updated_at_ms")
)

# A live lease lapses now; the epoch stays.
EXPIRE = _UPDATE.format(
    set="expires_at_ms = c.now",
    where="l.holder_kind <> '' AND l.expires_at_ms > c.now",
)

# The fallback for a transition this module has no statement for: read, run it in
# Python, write it back if the row is still exactly the one read.
_READ = f"SELECT {LEASE_COLS}, {NOW} FROM (SELECT 1) AS one LEFT JOIN leases ON target = %(target)s"
_CAS = (
    "INSERT INTO leases AS l (target, holder_kind, holder, epoch, expires_at_ms, next_holder, updated_at_ms)"
    " SELECT %(target)s, %(kind)s, %(holder)s, %(epoch)s, %(expires)s, %(next)s, %(now_ms)s"
    " WHERE %(absent)s ON CONFLICT (target) DO UPDATE SET "
    + _KEEP_PREV
    + ", holder_kind = EXCLUDED.holder_kind, holder = EXCLUDED.holder, epoch = EXCLUDED.epoch,"
    " expires_at_ms = EXCLUDED.expires_at_ms, next_holder = EXCLUDED.next_holder"
    " WHERE NOT %(absent)s AND (l.holder_kind, l.holder, l.epoch, l.expires_at_ms, l.next_holder)"
    " = (%(was_kind)s, %(was_holder)s, %(was_epoch)s, %(was_expires)s, %(was_next)s) " + _RETURNING
)

_MAX_ATTEMPTS = 8


class PgLeases:
    """The ``leases`` table: one compare-and-set statement per change.

    Args:
        db: the database.
    """

    def __init__(self, db: PgDatabase) -> None:
        self._db = db

    def row(self, target: str) -> LeaseInfo | None:
        """The stored row of ``target`` (a lapsed lease still shows its holder)."""
        sql = f"SELECT {LEASE_COLS} FROM leases WHERE target = %s"
        found = self._db.run(lambda c: c.execute(sql, (target,)).fetchone(), idempotent=True)
        return lease_row(found) if found else None

    def get(self, target: str) -> LeaseInfo:
        """The lease of ``target`` as it stands now, by the database's clock."""
        check_text("target", target, required=True)
        current, now = self._read(target)
        return current.effective(now)

    def rows(self) -> list[LeaseInfo]:
        """Every lease row."""
        found = self._db.run(lambda c: c.execute(f"SELECT {LEASE_COLS} FROM leases").fetchall(), idempotent=True)
        return [lease_row(r) for r in found]

    def _read(self, target: str) -> tuple[LeaseInfo, int]:
        params = {"target": target, "now": self._db.now()}
        found = self._db.run(lambda c: c.execute(_READ, params).fetchone(), idempotent=True)
        assert found is not None
        current = lease_row((target, *found[1:6])) if found[0] is not None else LeaseInfo(target)
        return current, int(found[6])

    def change(self, target: str, transition: Callable[[LeaseInfo, int], LeaseInfo]) -> tuple[LeaseInfo, LeaseInfo]:
        """Apply ``transition`` to the lease of ``target`` with one compare-and-set statement.

        Returns the lease before and after, as seen at the database's clock.
        """
        check_text("target", target, required=True)
        check = getattr(transition, "check", None)
        if check is not None:
            check()
        statement = _statement(target, transition)
        for _ in range(_MAX_ATTEMPTS):
            if statement is not None:
                sql, params, idempotent = statement
                params["now"] = self._db.now()
                done = self._db.run(_fetch_one(sql, params), idempotent=idempotent, what=_CHANGING)
                if done is not None:
                    deadline.changed()
                    return _before_after(target, done)
            current, now = self._read(target)
            new = transition(current, now)  # raises the conflict that explains a refusal
            if new == current:
                return current.effective(now), current.effective(now)
            if statement is None:  # no statement of its own: compare-and-set what was read
                done = self._db.run(_fetch_one(_CAS, _cas_params(current, new, now)), what=_CHANGING)
                if done is not None:
                    deadline.changed()
                    return _before_after(target, done)
        raise LeaseConflictError(f"the lease on {target!r} kept changing concurrently; try again")


def _statement(target: str, change: Callable[[LeaseInfo, int], LeaseInfo]) -> tuple[str, dict[str, Any], bool] | None:
    """The statement of a known change, its parameters, and whether running it twice is the
    same as once (then a lost connection is retried)."""
    p: dict[str, Any] = {"target": target}
    if isinstance(change, Acquire):
        return ACQUIRE, {**p, "holder": change.holder, "ttl": change.ttl}, True
    if isinstance(change, Renew):
        return RENEW, {**p, "holder": change.holder, "epoch": change.epoch, "ttl": change.ttl}, True
    if isinstance(change, Release):
        return RELEASE, {**p, "holder": change.holder, "epoch": change.epoch}, False
    if isinstance(change, TakeOver):  # ReportActivity too: the desk's human holder
        return TAKE_OVER, {**p, "holder": change.holder_for(target), "ttl": change.ttl}, True
    if isinstance(change, HandBack):
        return (
            HAND_BACK if change.epoch else HAND_BACK_NEW,
            {**p, "epoch": change.epoch, "next": change.next_holder},
            False,
        )
    if isinstance(change, Expire):
        return EXPIRE, p, True
    return None


def _fetch_one(sql: str, params: dict[str, Any]) -> Callable[[psycopg.Connection[Any]], tuple[Any, ...] | None]:
    """One lease statement, ended at a call's deadline (a row lock waited on past it rolls
    back rather than changing the lease for a caller that has given up), in one round trip
    (:meth:`PgDatabase.bounded_one`)."""
    return lambda conn: PgDatabase.bounded_one(conn, sql, params)


_CHANGING = "a lease change"


def _cas_params(current: LeaseInfo, new: LeaseInfo, now: int) -> dict[str, Any]:
    return {
        "target": new.target,
        "kind": new.holder_kind,
        "holder": new.holder,
        "epoch": new.epoch,
        "expires": new.expires_at_ms,
        "next": new.next_holder,
        "now_ms": now,
        "absent": current == LeaseInfo(current.target),
        "was_kind": current.holder_kind,
        "was_holder": current.holder,
        "was_epoch": current.epoch,
        "was_expires": current.expires_at_ms,
        "was_next": current.next_holder,
    }


def _before_after(target: str, row: tuple[Any, ...]) -> tuple[LeaseInfo, LeaseInfo]:
    after = lease_row(row[:6])
    before = lease_row((target, *row[6:11]))
    now = int(row[11])
    return before.effective(now), after.effective(now)
