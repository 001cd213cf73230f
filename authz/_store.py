"""The sidecar's state in one SQLite file: principals, grants, leases and the decision log.

The store is the truth: nothing above it caches grants or leases, and its clock
(:meth:`Store.now_ms`) is the only one that judges expiry. Lease changes are compare-and-set
on the epoch inside ``BEGIN IMMEDIATE`` transactions. Another backend (PostgreSQL) would
implement the same public methods.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from handrail.authz import _core
from handrail.authz._core import CheckInput, Decision, GrantInfo, LeaseInfo, Principal
from handrail.authz._errors import (
    AlreadyExistsError,
    LeaseConflictError,
    NotFoundError,
)

#: The file name of the store under the data directory.
DB_NAME = "authz.sqlite"

_MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "initial",
        """
        CREATE TABLE principals (
            name TEXT PRIMARY KEY,
            role TEXT NOT NULL,
            token_sha256 TEXT NOT NULL UNIQUE,
            created_at_ms INTEGER NOT NULL
        );
        CREATE TABLE grants (
            grant_id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            target TEXT NOT NULL,
            verbs TEXT NOT NULL,          -- JSON list of lowercase verbs
            origins TEXT NOT NULL,        -- JSON list of normalized origins
            expires_at_ms INTEGER NOT NULL,
            granted_by TEXT NOT NULL,
            note TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL,
            revoked_at_ms INTEGER
        );
        CREATE INDEX grants_principal_target ON grants (principal, target, created_at_ms);
        CREATE TABLE leases (
            target TEXT PRIMARY KEY,
            holder_kind TEXT NOT NULL,
            holder TEXT NOT NULL,
            epoch INTEGER NOT NULL,
            expires_at_ms INTEGER NOT NULL,
            next_holder TEXT NOT NULL,
            updated_at_ms INTEGER NOT NULL
        );
        CREATE TABLE decisions (
            decision_id TEXT PRIMARY KEY,
            created_at_ms INTEGER NOT NULL,
            caller TEXT NOT NULL,
            principal TEXT NOT NULL,
            target TEXT NOT NULL,
            lease_epoch INTEGER NOT NULL,
            verb TEXT NOT NULL,
            url TEXT NOT NULL,
            element_role TEXT NOT NULL,
            element_name TEXT NOT NULL,
            window_class TEXT NOT NULL,
            window_title TEXT NOT NULL,
            password_field INTEGER NOT NULL,
            action_id TEXT NOT NULL,
            allow INTEGER NOT NULL,
            reason TEXT NOT NULL,
            message TEXT NOT NULL,
            policies TEXT NOT NULL,       -- JSON list of policy @ids
            grant_id TEXT NOT NULL,
            current_epoch INTEGER NOT NULL
        );
        CREATE INDEX decisions_target_time ON decisions (target, created_at_ms);
        """,
    ),
)

_GRANT_COLS = (
    "grant_id, principal, target, verbs, origins, expires_at_ms, granted_by, note,"
    " created_at_ms, revoked_at_ms"
)
_LEASE_COLS = "target, holder_kind, holder, epoch, expires_at_ms, next_holder"


def hash_token(token: str) -> str:
    """The at-rest form of a bearer token: its sha256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _grant(row: tuple[Any, ...]) -> GrantInfo:
    gid, principal, target, verbs, origins, expires, by, note, created, revoked = row
    return GrantInfo(
        grant_id=str(gid),
        principal=str(principal),
        target=str(target),
        verbs=tuple(json.loads(str(verbs))),
        origins=tuple(json.loads(str(origins))),
        expires_at_ms=int(expires),
        granted_by=str(by),
        note=str(note),
        created_at_ms=int(created),
        revoked=revoked is not None,
    )


def _lease(row: tuple[Any, ...]) -> LeaseInfo:
    target, kind, holder, epoch, expires, next_holder = row
    return LeaseInfo(
        str(target),
        str(kind),
        str(holder),
        int(epoch),
        int(expires),
        str(next_holder),
    )


class Store:
    """The SQLite store of one sidecar.

    Connections are per thread (the gRPC server runs handlers on a thread pool). State changes
    run with ``synchronous=FULL``. The decision log is written on a second per-thread
    connection that uses ``synchronous=NORMAL`` unless ``durable_decisions`` is set: in WAL
    mode that survives a process crash but may lose the last decisions on power loss, and it
    keeps an fsync off the hot path of every check.

    Args:
        path: the SQLite file (created with its tables if missing).
        clock: returns unix milliseconds; defaults to the wall clock. Tests pass a fake.
        durable_decisions: fsync every decision-log insert.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], int] | None = None,
        durable_decisions: bool = False,
    ) -> None:
        self.path = Path(path)
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._decision_sync = "FULL" if durable_decisions else "NORMAL"
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self.migrate()

    @classmethod
    def in_dir(cls, data_dir: str | Path, **kwargs: object) -> Store:
        """Open (creating) ``authz.sqlite`` under ``data_dir``."""
        directory = Path(data_dir)
        directory.mkdir(parents=True, exist_ok=True)
        return cls(directory / DB_NAME, **kwargs)  # type: ignore[arg-type]

    # --- connections and transactions ---------------------------------------------------------

    def now_ms(self) -> int:
        """The store's clock, in unix milliseconds; the only clock that judges expiry."""
        return self._clock()

    def _connect(self, synchronous: str) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("the store is closed")
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        with self._lock:
            self._all.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect("FULL")
        return conn

    def _log_conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "log", None)
        if conn is None:
            conn = self._local.log = self._connect(self._decision_sync)
        return conn

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): commit on success, roll back on error."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this store opened (from any thread)."""
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def migrate(self) -> list[int]:
        """Apply the migrations not yet recorded in ``migrations``; return their versions."""
        applied: list[int] = []
        with self.atomic() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM migrations")}
            for version, name, sql in _MIGRATIONS:
                if version in done:
                    continue
                for statement in sql.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO migrations (version, name, applied_at_ms) VALUES (?, ?, ?)",
                    (version, name, self.now_ms()),
                )
                applied.append(version)
        return applied

    # --- principals ---------------------------------------------------------------------------

    def add_principal(self, name: str, role: str, token: str | None = None) -> str:
        """Create a principal; return its bearer token (generated when not given).

        Raises:
            InvalidArgumentError: empty name, unknown role, empty token.
            AlreadyExistsError: the name or the token is taken.
        """
        _core.check_text("name", name, required=True)
        _core.check_role("role", role)
        if token is None:
            token = secrets.token_urlsafe(24)
        _core.check_text("token", token, required=True)
        try:
            with self.atomic() as conn:
                conn.execute(
                    "INSERT INTO principals (name, role, token_sha256, created_at_ms)"
                    " VALUES (?, ?, ?, ?)",
                    (name, role, hash_token(token), self.now_ms()),
                )
        except sqlite3.IntegrityError:
            raise AlreadyExistsError(
                f"a principal named {name!r} or with that token already exists"
            ) from None
        return token

    def list_principals(self) -> list[tuple[str, str, int]]:
        """Every principal as ``(name, role, created_at_ms)``, by name."""
        rows = self._conn().execute(
            "SELECT name, role, created_at_ms FROM principals ORDER BY name"
        )
        return [(str(n), str(r), int(c)) for n, r, c in rows]

    @staticmethod
    def _lookup(conn: sqlite3.Connection, token_sha256: str) -> Principal | None:
        row = conn.execute(
            "SELECT name, role, token_sha256 FROM principals WHERE token_sha256 = ?",
            (token_sha256,),
        ).fetchone()
        if row is None or not hmac.compare_digest(str(row[2]), token_sha256):
            return None
        return Principal(str(row[0]), str(row[1]))

    def authenticate(self, token: str) -> Principal | None:
        """The principal a bearer token names, or None."""
        if not token:
            return None
        return self._lookup(self._conn(), hash_token(token))

    # --- checks -------------------------------------------------------------------------------

    def check_snapshot(
        self, token: str, principal: str, target: str
    ) -> tuple[Principal | None, LeaseInfo | None, list[GrantInfo], int]:
        """Everything a check needs, read in one transaction.

        Returns:
            (the caller named by ``token`` or None, the target's lease or None, every grant of
            (principal, target) oldest first, the store's clock).
        """
        conn = self._log_conn()
        conn.execute("BEGIN")
        try:
            caller = self._lookup(conn, hash_token(token)) if token else None
            row = conn.execute(
                f"SELECT {_LEASE_COLS} FROM leases WHERE target = ?", (target,)
            ).fetchone()
            grants = [
                _grant(r)
                for r in conn.execute(
                    f"SELECT {_GRANT_COLS} FROM grants WHERE principal = ? AND target = ?"
                    " ORDER BY created_at_ms, grant_id",
                    (principal, target),
                )
            ]
            now = self.now_ms()
        finally:
            conn.execute("COMMIT")
        return caller, (_lease(row) if row else None), grants, now

    def record_decision(
        self, caller: str, request: CheckInput, decision: Decision, now_ms: int
    ) -> None:
        """Append one decision, allow or deny, to the decision log."""
        self._log_conn().execute(
            "INSERT INTO decisions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                decision.decision_id,
                now_ms,
                caller,
                request.principal,
                request.target,
                request.lease_epoch,
                request.verb,
                request.url,
                request.element_role,
                request.element_name,
                request.window_class,
                request.window_title,
                int(request.password_field),
                request.action_id,
                int(decision.allow),
                decision.reason,
                decision.message,
                json.dumps(list(decision.policies)),
                decision.grant_id,
                decision.lease_epoch,
            ),
        )

    def count_decisions(self) -> int:
        """How many decisions the log holds."""
        return int(self._conn().execute("SELECT count(*) FROM decisions").fetchone()[0])

    # --- grants -------------------------------------------------------------------------------

    def add_grant(self, grant: GrantInfo, granted_by: str) -> GrantInfo:
        """Validate and store a new grant; the server sets id, granter, time and revoked."""
        now = self.now_ms()
        grant = _core.validate_grant(grant, now)
        stored = GrantInfo(
            grant_id=uuid.uuid4().hex,
            principal=grant.principal,
            target=grant.target,
            verbs=grant.verbs,
            origins=grant.origins,
            expires_at_ms=grant.expires_at_ms,
            granted_by=granted_by,
            note=grant.note,
            created_at_ms=now,
            revoked=False,
        )
        with self.atomic() as conn:
            conn.execute(
                f"INSERT INTO grants ({_GRANT_COLS}) VALUES (?,?,?,?,?,?,?,?,?,NULL)",
                (
                    stored.grant_id,
                    stored.principal,
                    stored.target,
                    json.dumps(list(stored.verbs)),
                    json.dumps(list(stored.origins)),
                    stored.expires_at_ms,
                    stored.granted_by,
                    stored.note,
                    stored.created_at_ms,
                ),
            )
        return stored

    def revoke_grant(self, grant_id: str) -> GrantInfo:
        """Revoke a grant (idempotent); return it.

        Raises:
            NotFoundError: no grant has that id.
        """
        _core.check_text("grant_id", grant_id, required=True)
        with self.atomic() as conn:
            conn.execute(
                "UPDATE grants SET revoked_at_ms = ? WHERE grant_id = ? AND revoked_at_ms IS NULL",
                (self.now_ms(), grant_id),
            )
            row = conn.execute(
                f"SELECT {_GRANT_COLS} FROM grants WHERE grant_id = ?", (grant_id,)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"no grant with id {grant_id!r}")
        return _grant(row)

    def list_grants(
        self, principal: str = "", target: str = "", include_inactive: bool = False
    ) -> list[GrantInfo]:
        """Grants, oldest first, optionally filtered; inactive ones only when asked."""
        sql = f"SELECT {_GRANT_COLS} FROM grants WHERE 1=1"
        args: list[object] = []
        if principal:
            sql += " AND principal = ?"
            args.append(principal)
        if target:
            sql += " AND target = ?"
            args.append(target)
        rows = self._conn().execute(sql + " ORDER BY created_at_ms, grant_id", args)
        grants = [_grant(r) for r in rows]
        if include_inactive:
            return grants
        now = self.now_ms()
        return [g for g in grants if g.is_active(now)]

    # --- leases -------------------------------------------------------------------------------

    def get_lease(self, target: str) -> LeaseInfo:
        """The lease of ``target`` as it stands now (a lapsed lease shows as free)."""
        _core.check_text("target", target, required=True)
        row = (
            self._conn()
            .execute(f"SELECT {_LEASE_COLS} FROM leases WHERE target = ?", (target,))
            .fetchone()
        )
        lease = _lease(row) if row else LeaseInfo(target)
        return lease.effective(self.now_ms())

    def change_lease(
        self, target: str, transition: Callable[[LeaseInfo, int], LeaseInfo]
    ) -> LeaseInfo:
        """Apply ``transition(current, now_ms)`` to the lease of ``target`` atomically.

        The new row is written with a compare-and-set on the epoch that was read, inside one
        ``BEGIN IMMEDIATE`` transaction. Returns the new lease as seen now.
        """
        _core.check_text("target", target, required=True)
        with self.atomic() as conn:
            now = self.now_ms()
            row = conn.execute(
                f"SELECT {_LEASE_COLS} FROM leases WHERE target = ?", (target,)
            ).fetchone()
            current = _lease(row) if row else LeaseInfo(target)
            new = transition(current, now)
            if new == current:
                return current.effective(now)
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
        return new.effective(now)
