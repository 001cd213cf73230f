"""Control leases over SQLite: a compare-and-set on the epoch, and the rows a check reads.

Every lease change runs its transition (a pure function of :mod:`._core`) on the row read
inside one ``BEGIN IMMEDIATE`` transaction and writes the result with a compare-and-set on
the epoch it read; the rows are then replaced in memory, where a check reads them.
"""

from __future__ import annotations

from collections.abc import Callable

from handrail.authz._core import check_text
from handrail.authz._errors import LeaseConflictError
from handrail.authz._models import LeaseInfo
from handrail.authz._sqlite_db import SqliteDatabase
from handrail.authz._sqlite_schema import LEASE_COLS, lease_row


class SqliteLeases:
    """The ``leases`` table, and its rows in memory (replaced, never mutated in place).

    Args:
        db: the database.
    """

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        self._rows: dict[str, LeaseInfo] = {}

    def load(self) -> None:
        """Read every lease row into memory."""
        with self._db.write_lock:
            rows = self._db.writer.execute(f"SELECT {LEASE_COLS} FROM leases")
            self._rows = {r[0]: lease_row(r) for r in rows}

    def row(self, target: str) -> LeaseInfo | None:
        """The stored row of ``target`` (a lapsed lease still shows its holder)."""
        return self._rows.get(target)

    def get(self, target: str) -> LeaseInfo:
        """The lease of ``target`` as it stands now (a lapsed lease shows as free)."""
        check_text("target", target, required=True)
        lease = self._rows.get(target) or LeaseInfo(target)
        return lease.effective(self._db.now_ms())

    def rows(self) -> list[LeaseInfo]:
        """Every lease row."""
        return list(self._rows.values())

    def change(self, target: str, transition: Callable[[LeaseInfo, int], LeaseInfo]) -> tuple[LeaseInfo, LeaseInfo]:
        """Apply ``transition(current, now_ms)`` to the lease of ``target`` atomically.

        Returns the lease before and after, as seen now.
        """
        check_text("target", target, required=True)
        with self._db.atomic() as conn:
            now = self._db.now_ms()
            row = conn.execute(f"SELECT {LEASE_COLS} FROM leases WHERE target = ?", (target,)).fetchone()
            current = lease_row(row) if row else LeaseInfo(target)
            new = transition(current, now)
            if new == current:
                return current.effective(now), current.effective(now)
            values = (
                new.holder_kind,
                new.holder,
                new.epoch,
                new.expires_at_ms,
                new.next_holder,
                now,
            )
            if row is None:
                conn.execute(
                    "INSERT INTO leases (holder_kind, holder, epoch, expires_at_ms, next_holder,"
                    " updated_at_ms, target) VALUES (?,?,?,?,?,?,?)",
                    (*values, target),
                )
            else:
                cur = conn.execute(
                    "UPDATE leases SET holder_kind=?, holder=?, epoch=?, expires_at_ms=?,"
                    " next_holder=?, updated_at_ms=? WHERE target=? AND epoch=?",
                    (*values, target, current.epoch),
                )
                if cur.rowcount != 1:  # cannot happen under BEGIN IMMEDIATE; kept as a guard
                    raise LeaseConflictError(f"the lease on {target!r} changed concurrently")
            self._rows = {**self._rows, target: new}
        return current.effective(now), new.effective(now)
