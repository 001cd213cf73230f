"""Principals over SQLite: names, roles, expiry, revocation, and bearer tokens kept as their
sha256 only.

Lookups are remembered, by token digest and by name, and forgotten as soon as any process
changes a principal: every change bumps ``principals_version`` in the same transaction, and
a stamp file beside the database (``<db>.principals``, 8 bytes, memory-mapped: reading it
is a memory read, no system call) before and after it; each lookup reads the stamp first
and the version row only when the stamp moved. So a revocation or a rotation made through
the sidecar, or by ``handrail authz principal`` on the file while the sidecar runs, acts on
the very next call, and an unchanged principal costs a dictionary lookup.
"""

from __future__ import annotations

import contextlib
import hmac
import mmap
import os
import secrets
import sqlite3
import struct
from collections.abc import Iterator
from pathlib import Path

from handrail.authz._core import check_role, check_text
from handrail.authz._errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from handrail.authz._models import Principal, PrincipalInfo, PrincipalState
from handrail.authz._sqlite_db import SqliteDatabase
from handrail.authz._sqlite_schema import hash_token

_COLS = "name, role, created_at_ms, expires_at_ms, revoked_at_ms"


def _info(row: tuple[object, ...]) -> PrincipalInfo:
    name, role, created, expires, revoked = row
    return PrincipalInfo(str(name), str(role), int(created), int(expires), int(revoked))  # type: ignore[call-overload]


def _current(cache: dict[str, tuple[int, PrincipalInfo]], version: int) -> dict[str, tuple[int, PrincipalInfo]]:
    """The entries of ``cache`` read at ``version`` (older ones are dropped)."""
    return {k: v for k, v in cache.items() if v[0] == version}


def new_token() -> str:
    """A fresh bearer token (never begins with '-': safe after a CLI flag)."""
    return "hr_" + secrets.token_urlsafe(24)


def chosen_token(token: str) -> str:
    """``token``, a caller's choice, if it can be used: not empty, not too long, and not
    beginning with '-' (``--token -x`` is a flag with no value to every command line)."""
    check_text("token", token, required=True)
    if token.startswith("-"):
        raise InvalidArgumentError("token", "must not begin with '-' (a command line would take it for a flag)")
    return token


class Stamp:
    """A counter in an 8-byte file, shared by every process that opens it (memory-mapped).

    Args:
        path: the file (created when missing).
    """

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < 8:
                os.pwrite(fd, b"\0" * 8, 0)
            self._map = mmap.mmap(fd, 8)
        finally:
            os.close(fd)  # the mapping keeps the file (as the decision journal's does)

    def read(self) -> int:
        """The counter now (as any process last wrote it)."""
        return int(struct.unpack_from("<Q", self._map)[0])

    def bump(self) -> None:
        """Move the counter (callers serialize: they hold a write transaction)."""
        struct.pack_into("<Q", self._map, 0, (self.read() + 1) % 2**64)

    def close(self) -> None:
        """Unmap the counter (again: nothing). It holds no descriptor: a second close of
        one, from a store closed twice (``AuthzServer.stop``'s thread and its caller),
        closed whatever file had taken that number since, in any thread."""
        with contextlib.suppress(BufferError, ValueError):
            self._map.close()


class SqlitePrincipals:
    """The ``principals`` table, and the lookups already made.

    Args:
        db: the database.
    """

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        try:
            self._stamp: Stamp | None = Stamp(db.path.with_name(db.path.name + ".principals"))
        except OSError:  # a read-only directory: read the version row on every lookup
            self._stamp = None
        self._seen: tuple[int, int] = (-1, -1)  # (stamp, version) last read
        # Replaced, never mutated: token digest / name -> (the version it was read at, the
        # principal). An entry read at an older version is never used.
        self._by_digest: dict[str, tuple[int, PrincipalInfo]] = {}
        self._by_name: dict[str, tuple[int, PrincipalInfo]] = {}

    # -- changes -------------------------------------------------------------------------------

    def add(self, name: str, role: str, token: str | None = None, expires_at_ms: int = 0) -> str:
        """Create a principal; return its bearer token (generated when not given).

        Raises:
            InvalidArgumentError: empty name, unknown role, empty token, negative expiry.
            AlreadyExistsError: the name or the token is taken.
        """
        check_text("name", name, required=True)
        check_role("role", role)
        token = new_token() if token is None else chosen_token(token)
        if expires_at_ms < 0:
            raise InvalidArgumentError("expires_at_ms", "must not be negative")
        try:
            with self._changing() as conn:
                conn.execute(
                    "INSERT INTO principals (name, role, token_sha256, created_at_ms, expires_at_ms)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (name, role, hash_token(token), self._db.now_ms(), expires_at_ms),
                )
                conn.execute("UPDATE principals_version SET v = v + 1")
        except sqlite3.IntegrityError:
            raise AlreadyExistsError(f"a principal named {name!r} or with that token already exists") from None
        return token

    def revoke(self, name: str) -> PrincipalInfo:
        """Revoke ``name``: its token stops authenticating at once (idempotent).

        Raises:
            NotFoundError: no such principal.
        """
        check_text("name", name, required=True)
        with self._changing() as conn:
            cur = conn.execute(
                "UPDATE principals SET revoked_at_ms = ? WHERE name = ? AND revoked_at_ms = 0",
                (self._db.now_ms(), name),
            )
            if cur.rowcount:
                conn.execute("UPDATE principals_version SET v = v + 1")
            row = conn.execute(f"SELECT {_COLS} FROM principals WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise NotFoundError(f"no principal {name!r}", field="name")
        return _info(row)

    def rotate(self, name: str, token: str | None = None, expires_at_ms: int = 0) -> tuple[PrincipalInfo, str]:
        """Give ``name`` a new token (the old one stops at once) expiring at ``expires_at_ms``.

        A revoked principal stays revoked.

        Raises:
            NotFoundError: no such principal.
            InvalidArgumentError: an expiry in the past.
        """
        check_text("name", name, required=True)
        if expires_at_ms < 0 or 0 < expires_at_ms <= self._db.now_ms():
            raise InvalidArgumentError("expires_at_ms", "must be in the future, or 0 for never")
        token = chosen_token(token) if token else new_token()
        try:
            with self._changing() as conn:
                cur = conn.execute(
                    "UPDATE principals SET token_sha256 = ?, expires_at_ms = ? WHERE name = ?",
                    (hash_token(token), expires_at_ms, name),
                )
                if not cur.rowcount:
                    raise NotFoundError(f"no principal {name!r}", field="name")
                conn.execute("UPDATE principals_version SET v = v + 1")
                row = conn.execute(f"SELECT {_COLS} FROM principals WHERE name = ?", (name,)).fetchone()
        except sqlite3.IntegrityError:
            raise AlreadyExistsError("that token is taken") from None
        return _info(row), token

    # -- lookups -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _changing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that changes principals: the stamp moves before and after."""
        if self._stamp is not None:
            self._stamp.bump()
        try:
            with self._db.atomic() as conn:
                yield conn
        finally:
            if self._stamp is not None:
                self._stamp.bump()

    def version(self) -> int:
        """The principals' version (read before any row); the version row is read only
        when the stamp moved."""
        if self._stamp is not None:
            stamp = self._stamp.read()
            seen_stamp, seen_version = self._seen
            if stamp == seen_stamp:
                return seen_version
        version = int(self._db.reader().execute("SELECT v FROM principals_version").fetchone()[0])
        if self._stamp is not None:
            self._seen = (stamp, version)
        return version

    def close(self) -> None:
        """Unmap the stamp."""
        if self._stamp is not None:
            self._stamp.close()

    def all(self) -> list[tuple[str, str, int]]:
        """Every principal as ``(name, role, created_at_ms)``, by name."""
        return [(p.name, p.role, p.created_at_ms) for p in self.infos()]

    def infos(self) -> list[PrincipalInfo]:
        """Every principal, by name."""
        rows = self._db.reader().execute(f"SELECT {_COLS} FROM principals ORDER BY name")
        return [_info(r) for r in rows]

    def by_name(self, name: str, version: int | None = None) -> PrincipalInfo | None:
        """The principal called ``name``, or None (``version``: :meth:`version`, when the
        caller read it already)."""
        if version is None:
            version = self.version()
        known = self._by_name.get(name)
        if known is not None and known[0] == version:
            return known[1]
        row = self._db.reader().execute(f"SELECT {_COLS} FROM principals WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        info = _info(row)
        self._by_name = {**_current(self._by_name, version), name: (version, info)}
        return info

    def by_token(self, token: str, version: int | None = None) -> PrincipalInfo | None:
        """The principal a bearer token names (whatever its state), or None (``version``:
        :meth:`version`, when the caller read it already)."""
        if not token:
            return None
        digest = hash_token(token)
        if version is None:
            version = self.version()
        known = self._by_digest.get(digest)
        if known is not None and known[0] == version:
            return known[1]
        row = (
            self._db.reader()
            .execute(
                f"SELECT {_COLS}, token_sha256 FROM principals WHERE token_sha256 = ?",
                (digest,),
            )
            .fetchone()
        )
        if row is None or not hmac.compare_digest(str(row[5]), digest):
            return None
        info = _info(row[:5])
        self._by_digest = {**_current(self._by_digest, version), digest: (version, info)}
        return info

    def authenticate(self, token: str) -> Principal | None:
        """The live principal a bearer token names, or None (unknown, revoked, expired)."""
        info = self.by_token(token)
        if info is None or info.state(self._db.now_ms()) is not PrincipalState.ACTIVE:
            return None
        return Principal(info.name, info.role, info.expires_at_ms)
