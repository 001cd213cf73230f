"""Proving a ledger: walk the hash chain and compare its end with both recorded heads.

The heads are the store's own (``meta`` inside a SQLite ledger, written with each append)
and the head file outside it. Verification is the same whatever the store: it reads the
stored columns and recomputes each hash (see ``_chain``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from ._chain import GENESIS_HASH, hash_columns
from ._errors import LedgerTamperedError
from ._headfile import read_head_file
from ._store import ChainSnapshot

__all__ = ["VerifyReport", "verify", "verify_absent", "verify_chain"]


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :meth:`Ledger.verify`.

    Attributes:
        ok: whether the whole chain verified, against both recorded heads.
        count: how many entries were read.
        first_bad_seq: the first entry that does not verify (for a deleted entry, the
            missing seq), or ``None`` when ``ok``.
        message: a one-line explanation.
        head_file: what the head file check found (``"seq 120 matches"``, ``"none"``, ...).
    """

    ok: bool
    count: int
    first_bad_seq: int | None
    message: str
    head_file: str = ""


def verify(snapshot: Callable[[], AbstractContextManager[ChainSnapshot]], head_path: Path | None) -> VerifyReport:
    """Verify the chain a store shows in ``snapshot()`` against its head and the head file.

    The head file is read before the snapshot is taken: it is only ever written after the
    entries it names committed, so it is never ahead of a later snapshot of an intact
    ledger.
    """
    try:
        recorded = read_head_file(head_path)
    except LedgerTamperedError as exc:
        return VerifyReport(False, 0, None, str(exc), head_file="damaged")
    with snapshot() as snap:
        return verify_chain(snap, recorded)


def verify_absent(head_path: Path | None, missing: str) -> VerifyReport | None:
    """Check a chain its store does not have against its head file: a head file past
    seq 0 (or a damaged one) is evidence its entries were deleted.

    Args:
        head_path: the chain's head file (None: it has none).
        missing: what the store lacks, e.g. ``"the database has no chain"``.

    Returns:
        None when there is no head file: nothing says the chain ever existed.
    """
    try:
        recorded = read_head_file(head_path)
    except LedgerTamperedError as exc:
        return VerifyReport(False, 0, None, f"{exc}; {missing}", head_file="damaged")
    if recorded is None:
        return None
    seq, digest = recorded
    if seq == 0 and digest == GENESIS_HASH:
        return VerifyReport(True, 0, None, f"0 entries, {missing}", "seq 0 matches")
    return _bad(1, f"head file says seq {seq} hash {digest}, {missing}", f"seq {seq} is past the end")


def verify_chain(snap: ChainSnapshot, recorded: tuple[int, str] | None) -> VerifyReport:
    """Recompute every hash of ``snap`` and check its end against both heads.

    Args:
        snap: the chain and the head its store records.
        recorded: ``(seq, hash)`` from the head file, or None when there is none.
    """
    head_seq, head_hash = snap.head
    file_seq, file_hash = recorded if recorded is not None else (0, GENESIS_HASH)
    at_file_seq = GENESIS_HASH  # the stored hash of entry #file_seq, once read
    prev = GENESIS_HASH
    expected = 1
    hash_of = hash_columns
    for rows in snap.rows:
        for seq, ts, kind, sid, aid, key, who, who_kind, epoch, body, prev_hash, digest in rows:
            if seq != expected:
                return _bad(expected, f"entry #{expected} is missing (next stored entry is #{seq})")
            if prev_hash != prev:
                return _bad(seq, f"entry #{seq} does not link to entry #{seq - 1} (prev_hash mismatch)")
            if hash_of(prev, seq, ts, kind, sid, aid, key, who, who_kind, epoch, body) != digest:
                return _bad(seq, f"entry #{seq} was altered (hash mismatch)")
            if seq == file_seq:
                at_file_seq = digest
            prev = digest
            expected += 1
    last = expected - 1
    if last != head_seq:
        if last < head_seq:
            return _bad(last + 1, f"entries #{last + 1}..#{head_seq} are missing (the tail was truncated)")
        return _bad(
            head_seq + 1,
            f"entry #{head_seq + 1} was added outside the ledger (recorded head #{head_seq})",
        )
    if prev != head_hash:
        return _bad(last, f"entry #{last} does not match the recorded head hash")
    if recorded is None:
        note = "none (a truncated tail cannot be checked)"
        return VerifyReport(True, last, None, f"{last} entries, chain verified", note)
    if file_seq > last:
        return _bad(
            last + 1,
            f"truncated: head file says seq {file_seq} hash {file_hash}, database ends at seq {last}",
            f"seq {file_seq} is past the end",
        )
    if at_file_seq != file_hash:
        return _bad(
            file_seq,
            f"replaced: head file says seq {file_seq} hash {file_hash}, "
            f"database entry #{file_seq} has hash {at_file_seq}",
            f"seq {file_seq} does not match",
        )
    return VerifyReport(True, last, None, f"{last} entries, chain verified", f"seq {file_seq} matches")


def _bad(seq: int, message: str, head_file: str = "not checked") -> VerifyReport:
    return VerifyReport(False, max(seq - 1, 0), seq, message, head_file)
