"""Approvals over SQLite: an operator's yes or no to one exact action, and its use.

An approval is bound to (principal, target, fingerprint, lease epoch); at most one of them is
pending (a unique partial index). Its status as stored is PENDING, APPROVED, DENIED, EXPIRED
or USED; a pending approval past its deadline reads EXPIRED at once
(:meth:`ApprovalInfo.effective`), and :meth:`SqliteApprovals.expire` writes that down.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from handrail.authz._core import check_text
from handrail.authz._errors import InvalidArgumentError, LeaseConflictError, NotFoundError
from handrail.authz._models import ApprovalInfo, ApprovalStatus
from handrail.authz._sqlite_db import SqliteDatabase
from handrail.authz._sqlite_schema import APPROVAL_ACTION_FIELDS, APPROVAL_COLS, approval_row


class SqliteApprovals:
    """The ``approvals`` table.

    Args:
        db: the database.
    """

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    # --- inside a check's transaction ---------------------------------------------------------

    @staticmethod
    def insert(conn: sqlite3.Connection, a: ApprovalInfo) -> None:
        """Insert a new approval inside the caller's transaction; raises
        :class:`sqlite3.IntegrityError` when one is pending for the same action already."""
        action: dict[str, Any] = {f: getattr(a, f) for f in APPROVAL_ACTION_FIELDS}
        action["policies"] = list(a.policies)
        conn.execute(
            f"INSERT INTO approvals ({APPROVAL_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                a.approval_id,
                a.principal,
                a.target,
                a.fingerprint,
                a.lease_epoch,
                a.status,
                a.deadline_ms,
                json.dumps(action),
                a.grant_id,
                a.decided_by,
                a.note,
                a.created_at_ms,
                a.decided_at_ms,
                a.used_at_ms,
                a.decision_id,
                a.used_by_decision_id,
            ),
        )

    @staticmethod
    def use(conn: sqlite3.Connection, approval_id: str, decision_id: str, now_ms: int) -> bool:
        """Mark an approved approval USED by ``decision_id`` inside the caller's transaction;
        False when it is no longer APPROVED or its deadline passed (a lost race)."""
        cur = conn.execute(
            "UPDATE approvals SET status = 'USED', used_at_ms = ?,"
            " used_by_decision_id = ? WHERE approval_id = ? AND status = 'APPROVED'"
            " AND deadline_ms > ?",
            (now_ms, decision_id, approval_id, now_ms),
        )
        return cur.rowcount == 1

    # --- the operator's calls -----------------------------------------------------------------

    @staticmethod
    def _read(conn: sqlite3.Connection, approval_id: str) -> ApprovalInfo:
        row = conn.execute(f"SELECT {APPROVAL_COLS} FROM approvals WHERE approval_id = ?", (approval_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no approval with id {approval_id!r}")
        return approval_row(row)

    def latest(self, principal: str, target: str, fingerprint: str, epoch: int) -> ApprovalInfo | None:
        """The newest approval bound to this exact action under this epoch."""
        row = (
            self._db.reader()
            .execute(
                f"SELECT {APPROVAL_COLS} FROM approvals WHERE principal = ? AND target = ?"
                " AND fingerprint = ? AND lease_epoch = ? ORDER BY created_at_ms DESC, rowid DESC"
                " LIMIT 1",
                (principal, target, fingerprint, epoch),
            )
            .fetchone()
        )
        return approval_row(row) if row else None

    def get(self, approval_id: str) -> ApprovalInfo:
        """One approval, with its status as of now (NotFoundError)."""
        check_text("approval_id", approval_id, required=True)
        return self._read(self._db.reader(), approval_id).effective(self._db.now_ms())

    def decide(self, approval_id: str, status: str, by: str, note: str) -> ApprovalInfo:
        """Approve or deny a pending approval; deciding it again the same way is a no-op.

        Raises:
            NotFoundError: no such approval.
            LeaseConflictError: it is not pending any more (decided otherwise, expired, used).
        """
        check_text("approval_id", approval_id, required=True)
        check_text("note", note)
        with self._db.atomic() as conn:
            now = self._db.now_ms()
            current = self._read(conn, approval_id).effective(now)
            if current.status == status:
                return current
            if current.status != ApprovalStatus.PENDING:
                raise LeaseConflictError(f"approval {approval_id} is {current.status.lower()}, not pending")
            conn.execute(
                "UPDATE approvals SET status = ?, decided_by = ?, note = ?, decided_at_ms = ?"
                " WHERE approval_id = ? AND status = 'PENDING'",
                (status, by, note, now, approval_id),
            )
            return self._read(conn, approval_id)

    def expire(self) -> list[ApprovalInfo]:
        """Mark pending approvals past their deadline EXPIRED; return them."""
        now = self._db.now_ms()
        due = self._db.reader().execute(
            "SELECT approval_id FROM approvals WHERE status = 'PENDING' AND deadline_ms <= ?",
            (now,),
        )
        ids = [str(r[0]) for r in due]
        if not ids:
            return []
        expired: list[ApprovalInfo] = []
        with self._db.atomic() as conn:
            for aid in ids:
                cur = conn.execute(
                    "UPDATE approvals SET status = 'EXPIRED' WHERE approval_id = ? AND status = 'PENDING'",
                    (aid,),
                )
                if cur.rowcount == 1:
                    expired.append(self._read(conn, aid))
        return expired

    def pending_deadlines(self) -> list[tuple[int, str]]:
        """``(deadline_ms, approval_id)`` of every pending approval."""
        rows = self._db.reader().execute("SELECT deadline_ms, approval_id FROM approvals WHERE status = 'PENDING'")
        return [(int(d), str(a)) for d, a in rows]

    def query(self, status: str = "", principal: str = "", target: str = "", limit: int = 100) -> list[ApprovalInfo]:
        """Approvals, newest first, optionally filtered by their status as of now."""
        if limit <= 0 or limit > 10_000:
            raise InvalidArgumentError("limit", "must be within 1..10000")
        if status and status not in ApprovalStatus.__members__:
            raise InvalidArgumentError("status", f"unknown approval status {status!r}")
        now = self._db.now_ms()
        sql = f"SELECT {APPROVAL_COLS} FROM approvals WHERE 1=1"
        args: list[object] = []
        if status == ApprovalStatus.PENDING:
            sql += " AND status = 'PENDING' AND deadline_ms > ?"
            args.append(now)
        elif status == ApprovalStatus.EXPIRED:
            sql += " AND (status = 'EXPIRED' OR (status = 'PENDING' AND deadline_ms <= ?))"
            args.append(now)
        elif status:
            sql += " AND status = ?"
            args.append(status)
        for column, value in (("principal", principal), ("target", target)):
            if value:
                sql += f" AND {column} = ?"
                args.append(value)
        sql += " ORDER BY created_at_ms DESC, rowid DESC LIMIT ?"
        args.append(limit)
        return [approval_row(r).effective(now) for r in self._db.reader().execute(sql, args)]
