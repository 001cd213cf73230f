"""Whether a store or ledger location names a PostgreSQL database (no driver loaded to tell)."""

from __future__ import annotations

__all__ = ["is_pg_dsn"]


def is_pg_dsn(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)
    rather than a file."""
    return location.startswith(("postgresql://", "postgres://"))
