"""Whether a ledger location names a PostgreSQL database (no driver imported to tell)."""

from __future__ import annotations

__all__ = ["is_pg_dsn"]


def is_pg_dsn(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return location.startswith(("postgresql://", "postgres://"))
