"""The head file ``<db>.head``: the chain's last seq and hash, kept outside the database.

It still holds when the whole database is replaced by an older copy. :class:`HeadWriter`
rewrites it atomically at most every ``interval_s`` (or at once when ``every`` entries are
waiting) and on close, from a thread of its own, so appends never wait for it. What it
cannot see is the entries appended after its last write.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
import time
from pathlib import Path

from ._chain import canonical_json, now_ms
from ._errors import LedgerError, LedgerTamperedError
from ._store import LedgerStore

__all__ = ["HeadWriter", "head_file_ids", "head_file_path", "read_head_file", "write_head_file"]

_log = logging.getLogger("handrail.recorder")
_HASH = re.compile(r"[0-9a-f]{64}")
_MAX_SEQ = 2**63 - 1  # a seq is a 64-bit integer in both stores


def head_file_path(db: str | Path) -> Path:
    """Where the head file of the ledger ``db`` lives: ``<db>.head``."""
    db = Path(db)
    return db.with_name(db.name + ".head")


def head_file_ids(folder: Path) -> list[str]:
    """The ids of the chains with a head file ``ledger-<id>.head`` in ``folder``, sorted.

    Raises:
        LedgerError: the folder cannot be listed.
    """
    try:
        return sorted(p.name[len("ledger-") : -len(".head")] for p in folder.glob("ledger-*.head"))
    except OSError as exc:
        raise LedgerError(f"cannot list the head files in {folder}: {exc.strerror or exc}") from exc


def read_head_file(path: Path | None) -> tuple[int, str] | None:
    """Return ``(seq, hash)`` from a head file, or ``None`` when there is none (or no path).

    Raises:
        LedgerTamperedError: something is there but it is not a head file: not UTF-8 JSON,
            no whole ``seq`` in 0..2**63-1, no 64-hex-digit ``hash``, or a folder.
        LedgerError: the file cannot be read (permissions, I/O).
    """
    if path is None:
        return None
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise LedgerTamperedError(f"head file {path} is damaged: it is a folder, not a file") from None
    except OSError as exc:
        raise LedgerError(f"cannot read head file {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise LedgerTamperedError(f"head file {path} is damaged: not UTF-8 JSON ({exc})") from None
    seq = data.get("seq") if isinstance(data, dict) else None
    digest = data.get("hash") if isinstance(data, dict) else None
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= _MAX_SEQ:
        raise LedgerTamperedError(f"head file {path} is damaged: seq {_shown(seq)} is not a whole number 0..2**63-1")
    if not isinstance(digest, str) or not _HASH.fullmatch(digest):
        raise LedgerTamperedError(f"head file {path} is damaged: hash {_shown(digest)} is not 64 hex digits")
    return seq, digest


def _shown(value: object) -> str:
    """A value read from a damaged file, short and on one line."""
    text = ascii(value)
    return text if len(text) <= 80 else text[:77] + "..."


def write_head_file(path: Path, seq: int, digest: str) -> None:
    """Replace the head file atomically: temp file, fsync, rename, fsync the folder."""
    data = canonical_json({"seq": seq, "hash": digest, "ts_ms": now_ms()}) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


class HeadWriter:
    """Keeps the head file a little behind the database, off the append path.

    A thread (started on the first append) writes the newest committed head when
    ``interval_s`` has passed since its last write, or at once when ``every`` entries
    are waiting. The writer is *frozen* when the file already disagrees with the
    database at open (a truncated or replaced database): the file is evidence, so it is
    never overwritten then.
    """

    def __init__(self, path: Path | None, interval_s: float, every: int, *, writable: bool = True) -> None:
        self.path = path
        self._writable = writable
        self.frozen: str | None = None if path is not None else "no head file"
        self._interval_s = interval_s
        self._every = every
        self._cv = threading.Condition()
        self._pending: tuple[int, str] | None = None
        self._written_seq = 0
        self._last_write = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._idle = False

    def check(self, store: LedgerStore) -> None:
        """Compare the file with the store at open; freeze or schedule a write."""
        if self.path is None:
            return
        try:
            recorded = read_head_file(self.path)
        except LedgerError as exc:
            self.frozen = str(exc)
            return
        db_seq, db_hash = store.head()
        if recorded is not None:
            seq, digest = recorded
            if seq > 0 and store.hash_at(seq) != digest:
                self.frozen = f"head file {self.path} says seq {seq}, the database disagrees"
                return
            self._written_seq = seq
        if db_seq > self._written_seq:
            self._pending = (db_seq, db_hash)  # written on the next append or at close

    def advance(self, seq: int, digest: str) -> None:
        """Note a committed head. Cheap: wakes the thread only when it is idle or behind."""
        with self._cv:
            if self.frozen or self._closed:
                return
            if self._pending is None or seq > self._pending[0]:
                self._pending = (seq, digest)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"ledger-head:{self._file().name}", daemon=True)
                self._thread.start()
            elif self._idle or seq - self._written_seq >= self._every:
                self._cv.notify()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()
        with self._cv:
            pending, self._pending = self._pending, None
        if pending is not None and not self.frozen:
            self._write(*pending)

    def _file(self) -> Path:
        assert self.path is not None  # a writer without a file is frozen
        return self.path

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._pending is None and not self._closed:
                    self._idle = True
                    self._cv.wait()
                self._idle = False
                if self._closed or self._pending is None:
                    return  # close() writes what is left
                wait = self._last_write + self._interval_s - time.monotonic()
                if wait > 0 and self._pending[0] - self._written_seq < self._every:
                    self._cv.wait(wait)  # advance() does not wake us here, unless behind
                    continue
                seq, digest = self._pending
                self._pending = None
            self._write(seq, digest)  # outside the lock: appends never wait on it

    def _write(self, seq: int, digest: str) -> None:
        if seq <= self._written_seq or not self._writable:
            return
        try:
            # Another process appending to the same file may have written a newer head.
            current = read_head_file(self._file())
            if current is not None and current[0] >= seq:
                self._written_seq = current[0]
                return
            write_head_file(self._file(), seq, digest)
        except (OSError, LedgerError) as exc:  # the ledger itself is fine; say so loudly
            _log.warning("cannot write head file %s: %s", self.path, exc)
            return
        self._written_seq = seq
        self._last_write = time.monotonic()
