"""Approvals and the decision log over PostgreSQL.

An approval changes state under its row's lock: deciding one reads it ``FOR UPDATE`` and
writes it in the same transaction; using one (the check it allows) and expiring one are
conditional ``UPDATE``\\ s (``status = 'PENDING'`` / ``'APPROVED'``), so of two replicas that
race, one wins and the other sees the new status. At most one approval is pending per
action (a unique partial index).

Decisions go straight into ``decision_log``, one ``INSERT`` per check on a connection whose
commits do not wait for the disk (``synchronous_commit = off``): once the call returns the
row is in the server, so it survives the sidecar being killed; a crash of the database
server itself may lose the last moments' (as the SQLite journal loses them to power loss).
``durable_decisions`` makes those commits synchronous. A decision that rests on a state
change is inserted in that change's transaction instead.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import psycopg

from handrail.authz import _deadline as deadline
from handrail.authz._core import check_text
from handrail.authz._errors import InvalidArgumentError, LeaseConflictError, NotFoundError
from handrail.authz._models import ApprovalInfo, ApprovalStatus, DecisionRecord, Spent
from handrail.authz._pg_db import NOW, PgDatabase, Statement
from handrail.authz._pg_schema import APPROVAL_COLS, DECISION_COLS
from handrail.authz._sqlite_schema import APPROVAL_ACTION_FIELDS, approval_row, decision_record, decision_row

_INSERT_APPROVAL = f"INSERT INTO approvals ({APPROVAL_COLS}) VALUES ({', '.join(['%s'] * 16)})"
_DECISION_PARAMS = tuple(f"d_{c.strip()}" for c in DECISION_COLS.split(","))
_DECISION_VALUES = ", ".join(f"%({p})s" for p in _DECISION_PARAMS)
_INSERT_DECISION = (
    f"INSERT INTO decision_log ({DECISION_COLS}) VALUES ({_DECISION_VALUES}) ON CONFLICT (decision_id) DO NOTHING"
)
_RECORD = Statement("handrail_record_decision", _INSERT_DECISION)


def conditional_insert(name: str, condition: str) -> Statement:
    """The statement of :meth:`PgDecisions.record_if` for ``condition`` (SQL over the
    store's clock as ``c.now``), prepared as ``name``."""
    return Statement(
        name,
        f"INSERT INTO decision_log ({DECISION_COLS}) SELECT {_DECISION_VALUES}"
        f" FROM (SELECT {NOW} AS now) AS c WHERE {condition}"
        " ON CONFLICT (decision_id) DO UPDATE SET at_ms = EXCLUDED.at_ms RETURNING seq",
    )


#: The decisions a prune's batch deletes: in ``(after, upto]`` and logged before a time.
_PRUNED = "WHERE seq > %s AND seq <= %s AND at_ms < %s"

_SPENT_COLS = "replay_key, decision_id, grant_id, approval_id, at_ms"
_KEEP_SPENT = f"INSERT INTO replays ({_SPENT_COLS}) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (replay_key) DO NOTHING"
_SPENT_BY = f"SELECT {_SPENT_COLS} FROM replays WHERE replay_key = %s AND at_ms >= %s"


def _decision_values(record: DecisionRecord) -> dict[str, Any]:
    return dict(zip(_DECISION_PARAMS, decision_row(record)[1:], strict=True))


class PgApprovals:
    """The ``approvals`` table.

    Args:
        db: the database.
    """

    def __init__(self, db: PgDatabase) -> None:
        self._db = db

    @staticmethod
    def insert(conn: psycopg.Connection[Any], a: ApprovalInfo) -> None:
        """Insert a new approval inside the caller's transaction; raises
        :class:`psycopg.errors.UniqueViolation` when one is pending for the action already."""
        action: dict[str, Any] = {f: getattr(a, f) for f in APPROVAL_ACTION_FIELDS}
        action["policies"] = list(a.policies)
        conn.execute(
            _INSERT_APPROVAL,
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
    def use(conn: psycopg.Connection[Any], approval_id: str, decision_id: str, now: int | None) -> bool:
        """Mark an approved approval USED by ``decision_id`` inside the caller's transaction;
        False when it is no longer APPROVED or its deadline passed (a lost race)."""
        sql = (
            "UPDATE approvals SET status = 'USED', used_at_ms = c.now, used_by_decision_id = %(d)s"
            f" FROM (SELECT {NOW} AS now) AS c"
            " WHERE approval_id = %(id)s AND status = 'APPROVED' AND deadline_ms > c.now"
        )
        return conn.execute(sql, {"d": decision_id, "id": approval_id, "now": now}).rowcount == 1

    def latest(self, principal: str, target: str, fingerprint: str, epoch: int) -> ApprovalInfo | None:
        """The newest approval bound to this exact action under this epoch."""
        sql = (
            f"SELECT {APPROVAL_COLS} FROM approvals WHERE principal = %s AND target = %s"
            " AND fingerprint = %s AND lease_epoch = %s ORDER BY created_at_ms DESC, seq DESC LIMIT 1"
        )
        args = (principal, target, fingerprint, epoch)
        row = self._db.run(lambda c: c.execute(sql, args).fetchone(), idempotent=True)
        return approval_row(row) if row else None

    def get(self, approval_id: str) -> ApprovalInfo:
        """One approval, with its status as of now (NotFoundError)."""
        check_text("approval_id", approval_id, required=True)
        sql = f"SELECT {APPROVAL_COLS}, {NOW} FROM approvals WHERE approval_id = %(id)s"
        row = self._db.run(
            lambda c: c.execute(sql, {"id": approval_id, "now": self._db.now()}).fetchone(), idempotent=True
        )
        if row is None:
            raise NotFoundError(f"no approval with id {approval_id!r}")
        return approval_row(row[:-1]).effective(int(row[-1]))

    def decide(self, approval_id: str, status: str, by: str, note: str) -> ApprovalInfo:
        """Approve or deny a pending approval under its row lock; deciding it again the same
        way is a no-op (LeaseConflictError when it is not pending; NotFoundError)."""
        check_text("approval_id", approval_id, required=True)
        check_text("note", note)
        select = f"SELECT {APPROVAL_COLS}, {NOW} FROM approvals WHERE approval_id = %(id)s FOR UPDATE"
        update = (
            "UPDATE approvals SET status = %(status)s, decided_by = %(by)s, note = %(note)s,"
            f" decided_at_ms = %(at)s WHERE approval_id = %(id)s AND status = 'PENDING' RETURNING {APPROVAL_COLS}"
        )

        def work(conn: psycopg.Connection[Any]) -> ApprovalInfo:
            with conn.transaction():
                PgDatabase.bound(conn)  # a row lock waited on past the deadline: rolled back
                row = conn.execute(select, {"id": approval_id, "now": self._db.now()}).fetchone()
                if row is None:
                    raise NotFoundError(f"no approval with id {approval_id!r}")
                now = int(row[-1])
                current = approval_row(row[:-1]).effective(now)
                if current.status == status:
                    return current
                if current.status != ApprovalStatus.PENDING:
                    raise LeaseConflictError(f"approval {approval_id} is {current.status.lower()}, not pending")
                params = {"status": status, "by": by, "note": note, "at": now, "id": approval_id}
                done = conn.execute(update, params).fetchone()
                assert done is not None  # the row is locked: still PENDING
                return approval_row(done)

        decided = self._db.run(work, idempotent=True, what=f"deciding approval {approval_id}")
        deadline.changed()
        return decided

    def expire(self) -> list[ApprovalInfo]:
        """Mark pending approvals past their deadline EXPIRED; return the ones this call
        expired (another replica's call gets the others)."""
        sql = (
            f"UPDATE approvals SET status = 'EXPIRED' WHERE status = 'PENDING' AND deadline_ms <= {NOW}"
            f" RETURNING {APPROVAL_COLS}"
        )
        rows = self._db.run(lambda c: c.execute(sql, {"now": self._db.now()}).fetchall(), idempotent=True)
        return [approval_row(r) for r in rows]

    def pending_deadlines(self) -> list[tuple[int, str]]:
        """``(deadline_ms, approval_id)`` of every pending approval."""
        sql = "SELECT deadline_ms, approval_id FROM approvals WHERE status = 'PENDING'"
        rows = self._db.run(lambda c: c.execute(sql).fetchall(), idempotent=True)
        return [(int(d), str(a)) for d, a in rows]

    def query(self, status: str = "", principal: str = "", target: str = "", limit: int = 100) -> list[ApprovalInfo]:
        """Approvals, newest first, optionally filtered by their status as of now."""
        if limit <= 0 or limit > 10_000:
            raise InvalidArgumentError("limit", "must be within 1..10000")
        if status and status not in ApprovalStatus.__members__:
            raise InvalidArgumentError("status", f"unknown approval status {status!r}")
        sql = f"SELECT {APPROVAL_COLS}, c.now FROM approvals, (SELECT {NOW} AS now) AS c WHERE true"
        params: dict[str, Any] = {"now": self._db.now(), "limit": limit}
        if status == ApprovalStatus.PENDING:
            sql += " AND status = 'PENDING' AND deadline_ms > c.now"
        elif status == ApprovalStatus.EXPIRED:
            sql += " AND (status = 'EXPIRED' OR (status = 'PENDING' AND deadline_ms <= c.now))"
        elif status:
            sql += " AND status = %(status)s"
            params["status"] = status
        for column, value in (("principal", principal), ("target", target)):
            if value:
                sql += f" AND {column} = %({column})s"
                params[column] = value
        sql += " ORDER BY created_at_ms DESC, seq DESC LIMIT %(limit)s"
        rows = self._db.run(lambda c: c.execute(sql, params).fetchall(), idempotent=True)
        return [approval_row(r[:-1]).effective(int(r[-1])) for r in rows]


class PgDecisions:
    """The ``decision_log`` table.

    Args:
        db: the database state changes go through (a decision with a state change).
        log_db: the database of plain decisions (``synchronous_commit = off`` unless durable).
    """

    def __init__(self, db: PgDatabase, log_db: PgDatabase) -> None:
        self._db = db
        self._log_db = log_db

    @staticmethod
    def new_id() -> str:
        """A fresh decision id: 32 random hex digits (replicas share no counter)."""
        return secrets.token_hex(16)

    def record(self, record: DecisionRecord) -> None:
        """Insert one decision (idempotent by id: retried after a lost connection); the
        statement is prepared on each connection (it runs once per check)."""
        self._log_db.execute(_RECORD, _decision_values(record), idempotent=True)

    def record_if(self, record: DecisionRecord, statement: Statement, params: dict[str, Any]) -> bool:
        """Insert one decision only if the condition of ``statement`` (a
        :func:`conditional_insert`) holds, with ``params``, judged in the same statement;
        whether it was inserted. Retried after a lost connection, an insert that had gone
        through counts as done."""
        values = _decision_values(record)
        values.update(params, now=self._log_db.now())
        return self._log_db.execute(statement, values, idempotent=True) > 0

    @staticmethod
    def insert(conn: psycopg.Connection[Any], record: DecisionRecord) -> None:
        """Insert one decision inside the caller's transaction."""
        conn.execute(_INSERT_DECISION, _decision_values(record))

    @staticmethod
    def keep_spent(conn: psycopg.Connection[Any], spent: Spent) -> bool:
        """Keep an allow for a resend of its request, inside the caller's transaction;
        False when one of the same request is kept already (a lost race)."""
        values = (spent.key, spent.decision_id, spent.grant_id, spent.approval_id, spent.at_ms)
        return conn.execute(_KEEP_SPENT, values).rowcount == 1

    def spent_by(self, key: str, since_ms: int) -> Spent | None:
        """The allow kept under ``key`` at or after ``since_ms`` (committed with its
        consumption: a snapshot that saw the one sees the other)."""
        row = self._db.run(lambda c: c.execute(_SPENT_BY, (key, since_ms)).fetchone(), idempotent=True)
        return None if row is None else Spent(str(row[0]), str(row[1]), str(row[2]), str(row[3]), int(row[4]))

    def drop_spent(self, before_ms: int) -> int:
        """Delete the allows kept before ``before_ms``; how many."""
        sql = "DELETE FROM replays WHERE at_ms < %s"
        return self._db.run(lambda c: c.execute(sql, (before_ms,)).rowcount, idempotent=True)

    def get(self, decision_id: str) -> DecisionRecord:
        """One logged decision (NotFoundError)."""
        check_text("decision_id", decision_id, required=True)
        sql = f"SELECT {DECISION_COLS} FROM decision_log WHERE decision_id = %s"
        row = self._db.run(lambda c: c.execute(sql, (decision_id,)).fetchone(), idempotent=True)
        if row is None:
            raise NotFoundError(f"no decision with id {decision_id!r}")
        return decision_record(row)

    def query(
        self, principal: str = "", target: str = "", reason: str = "", since_ms: int = 0, limit: int = 50
    ) -> list[DecisionRecord]:
        """Logged decisions, newest first, optionally filtered."""
        if limit <= 0 or limit > 10_000:
            raise InvalidArgumentError("limit", "must be within 1..10000")
        sql = f"SELECT {DECISION_COLS} FROM decision_log WHERE at_ms >= %(since)s"
        params: dict[str, Any] = {"since": since_ms, "limit": limit}
        for column, value in (("principal", principal), ("target", target), ("reason", reason)):
            if value:
                sql += f" AND {column} = %({column})s"
                params[column] = value
        sql += " ORDER BY seq DESC LIMIT %(limit)s"
        rows = self._db.run(lambda c: c.execute(sql, params).fetchall(), idempotent=True)
        return [decision_record(r) for r in rows]

    def count(self) -> int:
        """How many decisions the log holds."""
        row = self._db.run(lambda c: c.execute("SELECT count(*) FROM decision_log").fetchone(), idempotent=True)
        return int(row[0]) if row else 0

    #: Rows a prune deletes per statement (row locks only: inserts never wait for it).
    prune_batch = 10_000

    def top(self) -> int:
        """The newest decision's sequence number (0: none)."""
        sql = "SELECT coalesce(max(seq), 0) FROM decision_log"
        row = self._db.run(lambda c: c.execute(sql).fetchone(), idempotent=True)
        return int(row[0]) if row else 0

    def window(self, after: int, below: int, limit: int) -> list[tuple[int, int]]:
        """``(seq, at_ms)`` of up to ``limit`` decisions after ``after`` and below
        ``below``, in order."""
        sql = "SELECT seq, at_ms FROM decision_log WHERE seq > %s AND seq < %s ORDER BY seq LIMIT %s"
        rows = self._db.run(lambda c: c.execute(sql, (after, below, limit)).fetchall(), idempotent=True)
        return [(int(s), int(t)) for s, t in rows]

    def rows(self, after: int, upto: int, before_ms: int) -> list[tuple[Any, ...]]:
        """``seq`` and the decision columns of the decisions in ``(after, upto]`` logged
        before ``before_ms``, in order."""
        sql = f"SELECT seq, {DECISION_COLS} FROM decision_log {_PRUNED} ORDER BY seq"
        return self._db.run(lambda c: c.execute(sql, (after, upto, before_ms)).fetchall(), idempotent=True)

    def delete(self, after: int, upto: int, before_ms: int) -> int:
        """Delete the decisions in ``(after, upto]`` logged before ``before_ms``; how many
        (a delete retried after a lost connection counts what the retry deleted)."""
        sql = f"DELETE FROM decision_log {_PRUNED}"
        return self._db.run(lambda c: c.execute(sql, (after, upto, before_ms)).rowcount, idempotent=True)

    def delete_seqs(self, seqs: list[int], before_ms: int) -> int:
        """Delete the decisions of these sequence numbers that were logged before
        ``before_ms``; how many."""
        sql = "DELETE FROM decision_log WHERE seq = ANY(%s) AND at_ms < %s"
        return self._db.run(lambda c: c.execute(sql, (seqs, before_ms)).rowcount, idempotent=True)
