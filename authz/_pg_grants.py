"""Scope grants over PostgreSQL, read from the database at every check.

No replica keeps an index of grants: the SQLite store's in-memory index is coherent only
because one process writes the file, and with several replicas a revocation, a
consumption or a closed task made through one of them must act on the very next check made
through any other. A check reads the candidates of (principal, target)
through an index (``grants_exact``, ``grants_patterns``) in the same statement as the
lease, the database's clock and the caller's principal (:meth:`PgGrants.snapshot`): a check
costs that one read and the insert of its decision.

A single-use grant is consumed by one conditional ``UPDATE`` inside the check's
transaction (:meth:`PgGrants.consume`): concurrent checks on any replicas queue on the
row's lock, and each re-evaluates the condition on the committed row, so exactly one
matches.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import time
import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

import psycopg

from handrail.authz import _deadline as deadline
from handrail.authz._core import check_text, validate_grant
from handrail.authz._decide import target_matches
from handrail.authz._errors import NotFoundError
from handrail.authz._models import GrantInfo
from handrail.authz._pg_db import NOW, PgDatabase, Statement
from handrail.authz._pg_principals import PRINCIPAL_COLS_P, PRINCIPAL_COLS_T, principal_info
from handrail.authz._pg_schema import ENDED_GRANT_RETENTION_MS, GRANT_COLS, LEASE_COLS
from handrail.authz._sqlite_schema import grant_row, grant_scope_json, hash_token, lease_row
from handrail.authz._store import CheckSnapshot

_INSERT = (
    f"INSERT INTO grants ({GRANT_COLS}, is_pattern) VALUES"
    " (%s,%s,%s,%s,%s,%s,%s,%s,%s,NULL,%s,%s,%s,NULL,NULL,%s) ON CONFLICT (grant_id) DO NOTHING"
)

_ENDED = (
    "greatest(coalesce(g.revoked_at_ms, 0), coalesce(g.used_at_ms, 0), coalesce(g.closed_at_ms, 0), g.expires_at_ms)"
)
_G = ", ".join(f"g.{c.strip()}" for c in GRANT_COLS.split(","))
_L = ", ".join(f"l.{c.strip()}" for c in LEASE_COLS.split(","))

# One round trip per check: the database's clock, the principal the caller's token names
# (by its digest; "" matches nobody), the principal acted for, the lease row, and the
# candidate grants (one row each; none: one row of NULLs), oldest first; then the row
# versions (``xmin``, the transaction that wrote each row) of the caller's principal, the
# agent and the lease, with their places (``ctid``), which :func:`still_current` compares.
_FROM = (
    " FROM (SELECT {NOW} AS now) AS c"
    " LEFT JOIN principals AS t ON t.token_sha256 = %(digest)s"
    " LEFT JOIN principals AS p ON p.name = %(principal)s"
    " LEFT JOIN leases AS l ON l.target = %(target)s"
)
_CANDIDATES = (
    "g.principal = %(principal)s AND (g.target = %(target)s OR g.is_pattern)"
    f" AND ({_ENDED} = 0 OR {_ENDED} > c.now - {ENDED_GRANT_RETENTION_MS})"
)
_HEADS = "t.ctid::text, t.xmin::text, p.ctid::text, p.xmin::text, l.ctid::text, l.xmin::text"
SNAPSHOT = (
    f"SELECT c.now, {PRINCIPAL_COLS_T}, t.token_sha256, {PRINCIPAL_COLS_P}, {_L}, {_G}, {_HEADS}"
    + _FROM.replace("{NOW}", NOW)
    + f" LEFT JOIN grants AS g ON {_CANDIDATES}"
    " ORDER BY g.created_at_ms, g.grant_id"
)
_SNAPSHOT = Statement("handrail_check_snapshot", SNAPSHOT)
_N_COLS = 18 + len(GRANT_COLS.split(","))  # the columns before the row versions

_HEAD_ROWS = (("t", "principals", "token_sha256 = %(digest)s"), ("p", "principals", "name = %(principal)s"),
              ("l", "leases", "target = %(target)s"))  # fmt: skip


def still_current(present: tuple[bool, bool, bool]) -> str:
    """The condition under which a snapshot read earlier is still what the database holds,
    for a statement whose ``FROM`` has the clock as ``c``; ``present``: whether its caller's,
    agent's and lease's rows were found.

    Each row found is still the same version at the same place: the row at its ``ctid``
    (one page read, no index walk) is visible, was written by the same transaction
    (``xmin``) and has the same key. An update writes a new version elsewhere, with
    another ``xmin``; a row moved by ``VACUUM FULL`` is not at its old place, and another
    row there has another key or ``xmin``: either way the check is decided again on a
    fresh read. Each row not found is still missing (looked for by key, through its index).
    The clock lies in ``[lo, hi)``, where no time-stamp of those rows or of the grants
    read falls (so every expiry is judged as it was, and no grant has aged out of the
    candidates). The grants need no reading: every statement that writes grants writes the
    row of each principal whose grants it touched, in the same transaction (the trigger of
    migration 3), so a new, changed, used up or deleted grant of the agent is a new
    version of the agent's row.

    One statement per shape, with no ``CASE`` between them: the planner keeps a generic
    plan of each (over a ``CASE`` of the parameters it planned every run anew, 0.5 ms)."""
    parts = ["c.now >= %(lo)s AND c.now < %(hi)s"]
    for found, (row, table, key) in zip(present, _HEAD_ROWS, strict=True):
        if found:
            parts.append(
                f"EXISTS (SELECT FROM {table} AS {row} WHERE {row}.ctid = %({row}_tid)s::tid"
                f" AND {row}.xmin = %({row}_xmin)s::xid AND {row}.{key})"
            )
        else:
            parts.append(f"NOT EXISTS (SELECT FROM {table} WHERE {key})")
    return " AND ".join(parts)


class Reading(NamedTuple):
    """What :meth:`PgGrants.snapshot` read, as :func:`still_current` reads it again.

    Attributes:
        digest, principal, target: the snapshot's keys.
        versions: the place (``ctid``) and version (``xmin``) of the caller's principal,
            the agent and the lease, in turn (None, None for a row not found).
        stamps: every time-stamp of those rows and of the grants read (creations,
            expiries, ends, and when an ended grant stops being a candidate).
        at: ``time.monotonic()`` when the read came back.
    """

    digest: str
    principal: str
    target: str
    versions: tuple[str | None, ...]
    stamps: tuple[int, ...]
    at: float

    @property
    def shape(self) -> tuple[bool, bool, bool]:
        """Which of the caller's, the agent's and the lease's rows were found."""
        v = self.versions
        return (v[0] is not None, v[2] is not None, v[4] is not None)

    def params(self, now: int) -> dict[str, Any]:
        """:func:`still_current`'s parameters for a decision judged at ``now``: the clock
        must lie between the nearest stamps below and above it, and within
        :data:`CLOCK_SLACK_MS` of it (so the decision's time is the database's, give or take)."""
        lo = max([s for s in self.stamps if s <= now], default=0)
        hi = min([s for s in self.stamps if s > now], default=now + CLOCK_SLACK_MS + 1)
        return {
            "digest": self.digest,
            "principal": self.principal,
            "target": self.target,
            "t_tid": self.versions[0],
            "t_xmin": self.versions[1],
            "p_tid": self.versions[2],
            "p_xmin": self.versions[3],
            "l_tid": self.versions[4],
            "l_xmin": self.versions[5],
            "lo": max(lo, now - CLOCK_SLACK_MS),
            "hi": min(hi, now + CLOCK_SLACK_MS + 1),
        }


#: How far the clock a remembered snapshot is judged at may be from the database's.
CLOCK_SLACK_MS = 50

CONSUME = (
    "UPDATE grants SET used_at_ms = c.now FROM (SELECT " + NOW + " AS now) AS c"
    " WHERE grant_id = %(grant_id)s AND single_use AND used_at_ms IS NULL AND revoked_at_ms IS NULL"
    " AND closed_at_ms IS NULL AND (expires_at_ms = 0 OR expires_at_ms > c.now)"
    f" RETURNING {GRANT_COLS.replace('grant_id', 'grants.grant_id', 1)}"
)


class PgGrants:
    """The ``grants`` table.

    Args:
        db: the database.
    """

    def __init__(self, db: PgDatabase) -> None:
        self._db = db

    def snapshot(self, principal: str, target: str, token: str = "") -> CheckSnapshot:
        """The principal ``token`` names (when given), the principal ``principal`` (None:
        unknown), the lease row, its grants whose target is or covers ``target`` (oldest
        first) and the database's clock, in one statement (prepared on each connection);
        its ``stamp`` is the :class:`Reading` that can tell later whether it still holds."""
        digest = hash_token(token) if token else ""
        params = {"digest": digest, "principal": principal, "target": target, "now": self._db.now()}
        rows = self._db.fetch(_SNAPSHOT, params, idempotent=True)
        at = time.monotonic()
        first = rows[0]
        caller = None
        if first[1] is not None and hmac.compare_digest(str(first[6]), digest):
            caller = principal_info(first[1:6])
        agent = principal_info(first[7:12]) if first[7] is not None else None
        lease = lease_row(first[12:18]) if first[12] is not None else None
        grants = [
            grant_row(r[18:_N_COLS])
            for r in rows
            if r[18] is not None and (r[20] == target or target_matches(str(r[20]), target))
        ]
        stamps = [lease.expires_at_ms] if lease is not None else []
        for who in (caller, agent):
            if who is not None:
                stamps += (who.created_at_ms, who.expires_at_ms, who.revoked_at_ms)
        for g in grants:
            ended = max(g.revoked_at_ms, g.used_at_ms, g.closed_at_ms, g.expires_at_ms)
            stamps += (g.created_at_ms, g.expires_at_ms, g.revoked_at_ms, g.used_at_ms, g.closed_at_ms)
            if ended:  # the statement's _CANDIDATES leaves it out from then on
                stamps.append(ended + ENDED_GRANT_RETENTION_MS)
        reading = Reading(digest, principal, target, tuple(first[_N_COLS:]), tuple(stamps), at)
        return CheckSnapshot(caller, agent, lease, grants, int(first[0]), reading)

    def add(self, grants: Iterable[GrantInfo], granted_by: str) -> list[GrantInfo]:
        """Validate and store new grants in one transaction (ids are made here, so a retry
        after a lost connection stores nothing twice)."""
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

        # In principals' name order: each insert writes its principal's row (migration 3),
        # so transactions adding grants lock those rows in one order and never deadlock.
        in_order = sorted(stored, key=lambda g: g.principal)

        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction(), conn.cursor() as cur:
                PgDatabase.bound(conn)
                cur.executemany(_INSERT, [_values(g) for g in in_order])

        self._db.run(work, idempotent=True, what="adding grants")
        deadline.changed()
        return stored

    def revoke(self, grant_id: str) -> GrantInfo:
        """Revoke a grant (idempotent); return it (NotFoundError)."""
        check_text("grant_id", grant_id, required=True)
        sql = f"UPDATE grants SET revoked_at_ms = {NOW} WHERE grant_id = %(id)s AND revoked_at_ms IS NULL"
        self._db.run(lambda c: c.execute(sql, {"id": grant_id, "now": self._db.now()}), idempotent=True)
        deadline.changed()
        return self.get(grant_id)

    def close_task(self, task_id: str) -> list[GrantInfo]:
        """End every grant bound to ``task_id`` that is not closed yet; return them."""
        check_text("task_id", task_id, required=True)
        sql = (
            f"UPDATE grants SET closed_at_ms = {NOW} WHERE task_id = %(task)s AND closed_at_ms IS NULL"
            f" RETURNING {GRANT_COLS}"
        )
        rows = self._db.run(lambda c: c.execute(sql, {"task": task_id, "now": self._db.now()}).fetchall())
        deadline.changed()
        return sorted((grant_row(r) for r in rows), key=lambda g: (g.created_at_ms, g.grant_id))

    @staticmethod
    def consume(conn: psycopg.Connection[Any], grant_id: str, now: int | None) -> GrantInfo | None:
        """Use up a single-use grant inside the caller's transaction; None when it was
        consumed, ended or expired already (a lost race)."""
        row = conn.execute(CONSUME, {"grant_id": grant_id, "now": now}).fetchone()
        return grant_row(row) if row else None

    def get(self, grant_id: str) -> GrantInfo:
        """One grant by id (NotFoundError)."""
        check_text("grant_id", grant_id, required=True)
        sql = f"SELECT {GRANT_COLS} FROM grants WHERE grant_id = %s"
        row = self._db.run(lambda c: c.execute(sql, (grant_id,)).fetchone(), idempotent=True)
        if row is None:
            raise NotFoundError(f"no grant with id {grant_id!r}")
        return grant_row(row)

    def find(self, grant_id: str) -> GrantInfo | None:
        """One grant by id, or None."""
        sql = f"SELECT {GRANT_COLS} FROM grants WHERE grant_id = %s"
        row = self._db.run(lambda c: c.execute(sql, (grant_id,)).fetchone(), idempotent=True)
        return grant_row(row) if row else None

    def query(self, principal: str = "", target: str = "", include_inactive: bool = False) -> list[GrantInfo]:
        """Grants, oldest first, optionally filtered; inactive ones only when asked."""
        sql = f"SELECT {GRANT_COLS}, {NOW} FROM grants WHERE true"
        params: dict[str, Any] = {"now": self._db.now()}
        if principal:
            sql += " AND principal = %(principal)s"
            params["principal"] = principal
        if target:
            sql += " AND target = %(target)s"
            params["target"] = target
        rows = self._db.run(
            lambda c: c.execute(sql + " ORDER BY created_at_ms, grant_id", params).fetchall(), idempotent=True
        )
        grants = [(grant_row(r[:-1]), int(r[-1])) for r in rows]
        return [g for g, now in grants if include_inactive or g.is_active(now)]

    def expiries(self) -> list[tuple[int, str]]:
        """``(expires_at_ms, grant_id)`` of every active grant that expires."""
        sql = (
            f"SELECT expires_at_ms, grant_id FROM grants WHERE expires_at_ms > {NOW} AND revoked_at_ms IS NULL"
            " AND used_at_ms IS NULL AND closed_at_ms IS NULL"
        )
        rows = self._db.run(lambda c: c.execute(sql, {"now": self._db.now()}).fetchall(), idempotent=True)
        return [(int(at), str(gid)) for at, gid in rows]


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
        g.single_use,
        g.task_id,
        g.is_pattern,
    )
