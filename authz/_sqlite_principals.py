"""Principals over SQLite: names, roles, and bearer tokens kept as their sha256 only."""

from __future__ import annotations

import hmac
import secrets
import sqlite3

from handrail.authz._core import check_role, check_text
from handrail.authz._errors import AlreadyExistsError
from handrail.authz._models import Principal
from handrail.authz._sqlite_db import SqliteDatabase
from handrail.authz._sqlite_schema import hash_token


class SqlitePrincipals:
    """The ``principals`` table, and the tokens already seen.

    Known tokens are remembered (principals are only ever added, possibly by another
    process: an unknown token is always looked up in the file).

    Args:
        db: the database.
    """

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        self._known: dict[str, Principal] = {}  # token digest -> principal; replaced, never mutated

    def add(self, name: str, role: str, token: str | None = None) -> str:
        """Create a principal; return its bearer token (generated when not given).

        Raises:
            InvalidArgumentError: empty name, unknown role, empty token.
            AlreadyExistsError: the name or the token is taken.
        """
        check_text("name", name, required=True)
        check_role("role", role)
        if token is None:
            token = "hr_" + secrets.token_urlsafe(24)  # never begins with '-': safe after a CLI flag
        check_text("token", token, required=True)
        try:
            with self._db.atomic() as conn:
                conn.execute(
                    "INSERT INTO principals (name, role, token_sha256, created_at_ms) VALUES (?, ?, ?, ?)",
                    (name, role, hash_token(token), self._db.now_ms()),
                )
        except sqlite3.IntegrityError:
            raise AlreadyExistsError(f"a principal named {name!r} or with that token already exists") from None
        return token

    def all(self) -> list[tuple[str, str, int]]:
        """Every principal as ``(name, role, created_at_ms)``, by name."""
        rows = self._db.reader().execute("SELECT name, role, created_at_ms FROM principals ORDER BY name")
        return [(str(n), str(r), int(c)) for n, r, c in rows]

    def authenticate(self, token: str) -> Principal | None:
        """The principal a bearer token names, or None."""
        if not token:
            return None
        digest = hash_token(token)
        known = self._known.get(digest)
        if known is not None:
            return known
        row = (
            self._db.reader()
            .execute(
                "SELECT name, role, token_sha256 FROM principals WHERE token_sha256 = ?",
                (digest,),
            )
            .fetchone()
        )
        if row is None or not hmac.compare_digest(str(row[2]), digest):
            return None
        principal = Principal(str(row[0]), str(row[1]))
        self._known = {**self._known, digest: principal}
        return principal
