"""Whether a store or ledger location names a PostgreSQL database (no driver loaded to
tell), and why a first connection to one failed."""

from __future__ import annotations

import time

__all__ = ["is_pg_dsn", "why_no_connection"]


def is_pg_dsn(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)
    rather than a file."""
    return location.startswith(("postgresql://", "postgres://"))


def why_no_connection(dsn: str, timeout_s: float, where: str) -> str:
    """Connect to ``dsn`` once, trying again until ``timeout_s`` is spent (a database that
    is still starting); ``""`` once connected, else why not in one line naming ``where``,
    with libpq's reason (a refused port, an unknown host, a rejected password, a bad
    ``sslmode`` ...) where a connection pool's own attempts could say only that none came
    in time. A connection string that does not parse is said at once."""
    import psycopg  # the driver, only where a PostgreSQL location is opened

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            psycopg.connect(dsn, connect_timeout=max(2, int(timeout_s)), autocommit=True).close()
            return ""
        except psycopg.Error as exc:
            text = str(exc).strip()
            reason = text.splitlines()[0].strip() if text else type(exc).__name__
            if isinstance(exc, psycopg.ProgrammingError):  # the string itself: no use trying again
                return f"cannot connect to {where}: not a usable connection string: {reason}"
            if time.monotonic() + 0.2 >= deadline:
                return f"cannot connect to {where} within {timeout_s:g} s: {reason}"
        time.sleep(0.2)
