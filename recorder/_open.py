"""Opening a ledger by where it is: a SQLite file, or an executor's chain in PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

from handrail._dsn import is_pg_dsn

from ._errors import LedgerError
from ._ledger import Ledger

__all__ = ["open_ledger"]

#: An executor id that may name a file: its head file is ``ledger-<id>.head``.
FILE_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


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
            no head file. Appending, the id must match :data:`FILE_SAFE_ID`; reading, an id
            that does not gets no head file.
        read_only: only read (the ledger commands): nothing is migrated or created, appends
            raise ``LedgerError``.

    Raises:
        LedgerError: the database or file cannot be opened, or no executor id (or, to
            append, one that is not a file name) was given.
    """
    text = str(location)
    if not is_pg_dsn(text):
        return Ledger(Path(text), read_only=read_only)
    from ._postgres import PgLedgerStore  # psycopg only when a database is named

    safe = FILE_SAFE_ID.fullmatch(executor_id) is not None
    if not safe and not read_only:
        raise LedgerError(
            f"the executor id {executor_id!r} must be 1..200 letters, digits, '.', '_' or '-' (it names a file)",
            reason="INVALID_ARGUMENT",
        )
    store = PgLedgerStore(text, executor_id, read_only=read_only)
    # Reading, the ids come from the database: one that is not a file name (``x/../..``)
    # never becomes a path; its chain is verified without a head file.
    head = head_dir / f"ledger-{executor_id}" if head_dir is not None and safe else None
    if head is not None and not read_only:
        head.parent.mkdir(parents=True, exist_ok=True)
    return Ledger(head, store=store, read_only=read_only)
