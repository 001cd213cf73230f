"""Principals over PostgreSQL: names, roles, expiry, revocation, and bearer tokens kept as
their sha256 only, read from the database at every call.

No replica remembers a token or a principal. The SQLite store may (it forgets them when a
stamp file beside the database moves, which every process on that host shares), but
replicas on several hosts share no such file, and a version row would cost the very round
trip a cache saves: so a revocation, a rotation or an expiry made through any replica, or
by ``handrail authz principal ... --store`` while they run, acts on the very next call to
any of them. :meth:`PgPrincipals.identify` reads the principal a token names and the
database's clock in one statement, so authenticating a call is one round trip.
"""

from __future__ import annotations

import hmac
from typing import Any

import psycopg

from handrail.authz._core import check_role, check_text
from handrail.authz._errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from handrail.authz._models import Principal, PrincipalInfo, PrincipalState
from handrail.authz._pg_db import NOW, PgDatabase, Statement
from handrail.authz._sqlite_principals import chosen_token, new_token
from handrail.authz._sqlite_schema import hash_token

_COLS = "name, role, created_at_ms, expires_at_ms, revoked_at_ms"
#: The principal columns of a query that names the table ``p``.
PRINCIPAL_COLS_P = ", ".join(f"p.{c}" for c in _COLS.split(", "))
#: The same, for a query that names the table ``t`` (the caller's token, in a check).
PRINCIPAL_COLS_T = ", ".join(f"t.{c}" for c in _COLS.split(", "))

# The clock and the principal of one token digest (a row of NULLs when none), in one read.
# (Run on every authenticated call: prepared and sent through libpq as a check's statement
# is, which takes half the Python of a cursor's execute.)
_IDENTIFY = Statement(
    "handrail_identify",
    f"SELECT c.now, {PRINCIPAL_COLS_P}, p.token_sha256"
    f" FROM (SELECT {NOW} AS now) AS c LEFT JOIN principals AS p ON p.token_sha256 = %(digest)s",
)
# The same for a principal's name (an agent acted for, a lease's holder).
_BY_NAME_NOW = Statement(
    "handrail_principal_now",
    f"SELECT c.now, {PRINCIPAL_COLS_P} FROM (SELECT {NOW} AS now) AS c LEFT JOIN principals AS p ON p.name = %(name)s",
)


def principal_info(row: tuple[Any, ...]) -> PrincipalInfo:
    """A principal from its columns (``name, role, created_at_ms, expires_at_ms, revoked_at_ms``)."""
    name, role, created, expires, revoked = row
    return PrincipalInfo(str(name), str(role), int(created), int(expires), int(revoked))


class PgPrincipals:
    """The ``principals`` table (nothing remembered: see the module docstring).

    Args:
        db: the database.
    """

    def __init__(self, db: PgDatabase) -> None:
        self._db = db

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
        sql = (
            "INSERT INTO principals (name, role, token_sha256, created_at_ms, expires_at_ms)"
            f" VALUES (%(n)s, %(r)s, %(t)s, {NOW}, %(e)s)"
        )
        params = {"n": name, "r": role, "t": hash_token(token), "e": expires_at_ms, "now": self._db.now()}
        try:
            self._db.run(lambda c: c.execute(sql, params))
        except psycopg.errors.UniqueViolation:
            raise AlreadyExistsError(f"a principal named {name!r} or with that token already exists") from None
        return token

    def revoke(self, name: str) -> PrincipalInfo:
        """Revoke ``name``: its token stops authenticating at once, on every replica
        (idempotent: a second revocation keeps the first one's time).

        Raises:
            NotFoundError: no such principal.
        """
        check_text("name", name, required=True)
        sql = (
            f"UPDATE principals SET revoked_at_ms = CASE WHEN revoked_at_ms = 0 THEN {NOW} ELSE revoked_at_ms END"
            f" WHERE name = %(n)s RETURNING {_COLS}"
        )
        params = {"n": name, "now": self._db.now()}
        row = self._db.run(lambda c: c.execute(sql, params).fetchone(), idempotent=True)
        if row is None:
            raise NotFoundError(f"no principal {name!r}", field="name")
        return principal_info(row)

    def rotate(self, name: str, token: str | None = None, expires_at_ms: int = 0) -> tuple[PrincipalInfo, str]:
        """Give ``name`` a new token (the old one stops at once) expiring at ``expires_at_ms``.

        A revoked principal stays revoked. The expiry is judged by the database's clock in
        the same statement.

        Raises:
            NotFoundError: no such principal.
            InvalidArgumentError: an expiry in the past.
            AlreadyExistsError: the token is taken.
        """
        check_text("name", name, required=True)
        if expires_at_ms < 0:
            raise InvalidArgumentError("expires_at_ms", "must be in the future, or 0 for never")
        token = chosen_token(token) if token else new_token()
        sql = (
            "WITH c AS (SELECT " + NOW + " AS now)"
            " UPDATE principals SET token_sha256 = %(t)s, expires_at_ms = %(e)s FROM c"
            f" WHERE name = %(n)s AND (%(e)s = 0 OR %(e)s > c.now)"
            f" RETURNING {_COLS}, c.now"
        )
        params = {"n": name, "t": hash_token(token), "e": expires_at_ms, "now": self._db.now()}
        try:
            row = self._db.run(lambda c: c.execute(sql, params).fetchone(), idempotent=True)
        except psycopg.errors.UniqueViolation:
            raise AlreadyExistsError("that token is taken") from None
        if row is None:
            if self.by_name(name) is None:
                raise NotFoundError(f"no principal {name!r}", field="name")
            raise InvalidArgumentError("expires_at_ms", "must be in the future, or 0 for never")
        return principal_info(row[:5]), token

    # -- lookups -------------------------------------------------------------------------------

    def all(self) -> list[tuple[str, str, int]]:
        """Every principal as ``(name, role, created_at_ms)``, by name."""
        return [(p.name, p.role, p.created_at_ms) for p in self.infos()]

    def infos(self) -> list[PrincipalInfo]:
        """Every principal, by name."""
        sql = f"SELECT {_COLS} FROM principals ORDER BY name"
        rows = self._db.run(lambda c: c.execute(sql).fetchall(), idempotent=True)
        return [principal_info(r) for r in rows]

    def by_name(self, name: str) -> PrincipalInfo | None:
        """The principal called ``name`` as it stands now, or None."""
        sql = f"SELECT {_COLS} FROM principals WHERE name = %s"
        row = self._db.run(lambda c: c.execute(sql, (name,)).fetchone(), idempotent=True)
        return principal_info(row) if row else None

    def by_name_now(self, name: str) -> tuple[PrincipalInfo | None, int]:
        """The principal called ``name`` (or None) and the database's clock, in one statement."""
        row = self._db.fetch(_BY_NAME_NOW, {"name": name, "now": self._db.now()}, idempotent=True)[0]
        return (principal_info(row[1:6]) if row[1] is not None else None), int(row[0])

    def identify(self, token: str) -> tuple[PrincipalInfo | None, int]:
        """The principal a bearer token names (whatever its state, or None) and the
        database's clock, in one statement."""
        digest = hash_token(token) if token else ""
        row = self._db.fetch(_IDENTIFY, {"digest": digest, "now": self._db.now()}, idempotent=True)[0]
        now = int(row[0])
        if not token or row[1] is None or not hmac.compare_digest(str(row[6]), digest):
            return None, now
        return principal_info(row[1:6]), now

    def by_token(self, token: str) -> PrincipalInfo | None:
        """The principal a bearer token names (whatever its state), or None."""
        return self.identify(token)[0]

    def authenticate(self, token: str) -> Principal | None:
        """The live principal a bearer token names, or None (unknown, revoked, expired)."""
        info, now = self.identify(token)
        if info is None or info.state(now) is not PrincipalState.ACTIVE:
            return None
        return Principal(info.name, info.role, info.expires_at_ms)
