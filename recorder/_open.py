"""Opening a ledger by where it is: a SQLite file, or an executor's chain in PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from handrail._dsn import is_pg_dsn

from ._ledger import Ledger

__all__ = ["open_ledger"]


def open_ledger(
    location: str | Path, *, executor_id: str = "", head_dir: Path | None = None, read_only: bool = False
) -> Ledger:
    """Open the ledger at ``location``.

    Args:
        location: a SQLite file, or a ``postgresql://`` URL (then ``executor_id`` names the
            chain this ledger appends to and reads).
        executor_id: the executor whose chain it is (PostgreSQL only; required there).
        head_dir: PostgreSQL only: keep the chain's head file ``ledger-<executor_id>.head``
            in this folder (evidence outside the database, as beside a SQLite file); None:
            no head file.
        read_only: only read (the ledger commands): nothing is migrated or created, appends
            raise ``LedgerError``.

    Raises:
        LedgerError: the database or file cannot be opened, or no executor id was given.
    """
    text = str(location)
    if not is_pg_dsn(text):
        return Ledger(Path(text), read_only=read_only)
    from ._postgres import PgLedgerStore  # psycopg only when a database is named

    store = PgLedgerStore(text, executor_id, read_only=read_only)
    head = head_dir / f"ledger-{executor_id}" if head_dir is not None else None
    if head is not None and not read_only:
        head.parent.mkdir(parents=True, exist_ok=True)
    return Ledger(head, store=store, read_only=read_only)
