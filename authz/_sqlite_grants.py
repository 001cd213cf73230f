"""Scope grants over SQLite, with the in-memory index a check reads them from.

The file is the truth; every change is committed first and only then applied to the index
(under the write lock, by replacing buckets, never mutating one a reader may hold). Only the
sidecar process writes grants, so the index stays coherent; revocation and expiry are seen
by the very next check because a check reads the index, never a cached decision, and
judges expiry against the store's clock.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import uuid
from collections.abc import Iterable
from typing import Any

from handrail.authz._core import check_text, validate_grant
from handrail.authz._decide import target_matches
from handrail.authz._errors import NotFoundError
from handrail.authz._models import GrantInfo
from handrail.authz._sqlite_db import SqliteDatabase
from handrail.authz._sqlite_schema import ENDED_GRANT_RETENTION_MS, GRANT_COLS, grant_row, grant_scope_json

_INSERT = f"INSERT INTO grants ({GRANT_COLS}) VALUES (?,?,?,?,?,?,?,?,?,NULL,?,?,?,NULL,NULL)"


class SqliteGrants:
    """The ``grants`` table and its index: by (principal, target) for grants of one target,
    by principal for grants whose target is a pattern.

    Args:
        db: the database.
    """

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        self._grants: dict[str, GrantInfo] = {}
        self._exact: dict[tuple[str, str], tuple[GrantInfo, ...]] = {}
        self._patterns: dict[str, tuple[GrantInfo, ...]] = {}

    def load(self) -> None:
        """Index every grant still active, or ended within :data:`ENDED_GRANT_RETENTION_MS`."""
        with self._db.write_lock:
            horizon = self._db.now_ms() - ENDED_GRANT_RETENTION_MS
            rows = self._db.writer.execute(
                f"SELECT {GRANT_COLS} FROM grants WHERE max(coalesce(revoked_at_ms, 0),"
                " coalesce(used_at_ms, 0), coalesce(closed_at_ms, 0), expires_at_ms) = 0"
                " OR max(coalesce(revoked_at_ms, 0), coalesce(used_at_ms, 0),"
                " coalesce(closed_at_ms, 0), expires_at_ms) > ?"
                " ORDER BY created_at_ms, grant_id",
                (horizon,),
            )
            self._grants = {}
            self._exact = {}
            self._patterns = {}
            for row in rows:
                self.index(grant_row(row))

    def index(self, grant: GrantInfo) -> None:
        """Put ``grant`` (new or changed) into the index; the caller holds the write lock."""
        old = self._grants.get(grant.grant_id)
        self._grants[grant.grant_id] = grant
        if grant.is_pattern:
            bucket = self._patterns.get(grant.principal, ())
            self._patterns[grant.principal] = _replace_in(bucket, old, grant)
        else:
            key = (grant.principal, grant.target)
            self._exact[key] = _replace_in(self._exact.get(key, ()), old, grant)

    @staticmethod
    def read(conn: sqlite3.Connection, grant_id: str) -> GrantInfo:
        """One grant as the file holds it (NotFoundError)."""
        row = conn.execute(f"SELECT {GRANT_COLS} FROM grants WHERE grant_id = ?", (grant_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no grant with id {grant_id!r}")
        return grant_row(row)

    # --- changes ------------------------------------------------------------------------------

    def add(self, grants: Iterable[GrantInfo], granted_by: str) -> list[GrantInfo]:
        """Validate and store new grants in one transaction; the server sets each one's id,
        granter, time and state."""
        now = self._db.now_ms()
        stored = [
            dataclasses.replace(
                validate_grant(g, now),
                grant_id=uuid.uuid4().hex,
                granted_by=granted_by,
                created_at_ms=now,
                revoked=False,
                revoked_at_ms=0,
                used_at_ms=0,
                closed_at_ms=0,
            )
            for g in grants
        ]
        with self._db.atomic() as conn:
            conn.executemany(_INSERT, [_values(g) for g in stored])
            for g in stored:
                self.index(g)
        return stored

    def revoke(self, grant_id: str) -> GrantInfo:
        """Revoke a grant (idempotent); return it (NotFoundError)."""
        check_text("grant_id", grant_id, required=True)
        with self._db.atomic() as conn:
            conn.execute(
                "UPDATE grants SET revoked_at_ms = ? WHERE grant_id = ? AND revoked_at_ms IS NULL",
                (self._db.now_ms(), grant_id),
            )
            grant = self.read(conn, grant_id)
            self.index(grant)
        return grant

    def close_task(self, task_id: str) -> list[GrantInfo]:
        """End every grant bound to ``task_id`` that is not closed yet; return them."""
        check_text("task_id", task_id, required=True)
        with self._db.atomic() as conn:
            ids = [
                str(r[0])
                for r in conn.execute(
                    "SELECT grant_id FROM grants WHERE task_id = ? AND closed_at_ms IS NULL",
                    (task_id,),
                )
            ]
            conn.execute(
                "UPDATE grants SET closed_at_ms = ? WHERE task_id = ? AND closed_at_ms IS NULL",
                (self._db.now_ms(), task_id),
            )
            closed = [self.read(conn, gid) for gid in ids]
            for grant in closed:
                self.index(grant)
        return closed

    @staticmethod
    def consume(conn: sqlite3.Connection, grant_id: str, now_ms: int) -> bool:
        """Use up a single-use grant inside the caller's transaction: a conditional
        ``UPDATE``; False when it was consumed, ended or expired already (a lost race).
        The caller re-indexes the grant once its transaction holds."""
        cur = conn.execute(
            "UPDATE grants SET used_at_ms = ? WHERE grant_id = ? AND single_use = 1"
            " AND used_at_ms IS NULL AND revoked_at_ms IS NULL"
            " AND closed_at_ms IS NULL AND (expires_at_ms = 0 OR expires_at_ms > ?)",
            (now_ms, grant_id, now_ms),
        )
        return cur.rowcount == 1

    # --- reads --------------------------------------------------------------------------------

    def get(self, grant_id: str) -> GrantInfo:
        """One grant by id, from the file (NotFoundError)."""
        check_text("grant_id", grant_id, required=True)
        return self.read(self._db.reader(), grant_id)

    def query(self, principal: str = "", target: str = "", include_inactive: bool = False) -> list[GrantInfo]:
        """Grants, oldest first, optionally filtered; inactive ones only when asked."""
        sql = f"SELECT {GRANT_COLS} FROM grants WHERE 1=1"
        args: list[object] = []
        if principal:
            sql += " AND principal = ?"
            args.append(principal)
        if target:
            sql += " AND target = ?"
            args.append(target)
        rows = self._db.reader().execute(sql + " ORDER BY created_at_ms, grant_id", args)
        grants = [grant_row(r) for r in rows]
        if include_inactive:
            return grants
        now = self._db.now_ms()
        return [g for g in grants if g.is_active(now)]

    def covering(self, principal: str, target: str) -> list[GrantInfo]:
        """The indexed grants of ``principal`` whose target is or covers ``target``, oldest
        first (a check's candidates)."""
        exact = self._exact.get((principal, target), ())
        patterns = self._patterns.get(principal, ())
        if not patterns:
            return list(exact)
        covering = [g for g in patterns if target_matches(g.target, target)]
        return sorted([*exact, *covering], key=lambda g: (g.created_at_ms, g.grant_id))

    def expiries(self) -> list[tuple[int, str]]:
        """``(expires_at_ms, grant_id)`` of every active indexed grant that expires."""
        now = self._db.now_ms()
        return [(g.expires_at_ms, g.grant_id) for g in self._grants.values() if g.expires_at_ms and g.is_active(now)]

    def indexed(self, grant_id: str) -> GrantInfo | None:
        """The grant as the index holds it (None when it is not indexed)."""
        return self._grants.get(grant_id)


def _values(g: GrantInfo) -> tuple[Any, ...]:
    return (
        g.grant_id,
        g.principal,
        g.target,
        json.dumps(list(g.verbs)),
        json.dumps(list(g.origins)),
        g.expires_at_ms,
        g.granted_by,
        g.note,
        g.created_at_ms,
        grant_scope_json(g),
        int(g.single_use),
        g.task_id,
    )


def _replace_in(bucket: tuple[GrantInfo, ...], old: GrantInfo | None, new: GrantInfo) -> tuple[GrantInfo, ...]:
    if old is None:
        return (*bucket, new)
    return tuple(new if g.grant_id == new.grant_id else g for g in bucket)
