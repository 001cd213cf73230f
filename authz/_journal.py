"""The decision journal: a decision reaches the page cache before its answer is sent.

A journal is a file next to the database, allocated at a fixed size and mapped into memory
(``MAP_SHARED``). Appending a decision copies its entry into the mapping: no system call,
and the bytes are in the page cache the moment the copy ends, so they survive ``kill -9``
of the process exactly as a ``write()`` would (not power loss or an OS crash: nothing is
fsynced). The blocks are allocated when the file is made, and its pages are mapped for
writing before it is used, off the request path, so a full disk shows up as an error then,
never as a fault while a decision is copied.

An entry is a frame: a marker byte (never zero), the payload's length (never zero) and a
CRC-32 of the payload that starts from the length (little-endian, 4 bytes each), then the
payload (the store's ``marshal`` of the decision's fields; the JSON the log keeps is made
when the entry is flushed, off the request path). The file starts as zeros, every byte is
written at most once, and entries are copied one at a time, so a kill can cut short only
the last one, with any of its bytes copied or not (``memcpy`` here stores an entry's first
32 bytes last). :func:`read_frames` keeps the entries up to the first zero where a marker
should be or the first that fails its CRC: every entry that was acknowledged, and only
those; a whole entry after one that fails is damage, not a kill, and is an error.

Journals written by earlier versions hold JSON lines instead (zero bytes where a cut line
was not copied, which JSON never holds): :func:`read_lines` reads those. Which one a file
holds is told by its first byte (:func:`journal_format`): the marker, ``[``, or a zero
when its first entry was cut short (then nothing in it was acknowledged).

:class:`DecisionJournal` keeps the journals of one database (the current one, a spare made
ahead, full ones until flushed); the store decides where their decisions go.
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
import threading
import time
import zlib
from pathlib import Path
from typing import Any

#: The name every journal file ends with.
SUFFIX = ".decisions.journal"

#: How large a journal file is made (a decision line is about 1 KB).
JOURNAL_BYTES = 1 << 20

#: The first byte of every frame (a journal of JSON lines starts with ``[`` instead).
MARKER = 0xD5

_HEADER = struct.Struct("<BII")  # marker, payload length, CRC-32 of the payload from the length
_names = itertools.count()


class Journal:
    """One journal file, mapped; appends are not thread-safe (the store holds a lock).

    Build it with :meth:`create`.

    Attributes:
        path: the file.
        size: its size in bytes.
        end: how many bytes have been appended.
    """

    def __init__(self, path: Path, mapping: mmap.mmap, size: int) -> None:
        self.path = path
        self.size = size
        self.end = 0
        self._map = mapping

    @classmethod
    def create(cls, database: Path, size: int = JOURNAL_BYTES, *, prefault: int = 0) -> Journal:
        """A new, zero-filled journal next to ``database``.

        Args:
            database: the SQLite file the journal belongs to.
            size: bytes to allocate.
            prefault: bytes at the start whose pages are mapped for writing now, so that
                the first appends do not take a page fault (call it off the request path).

        Raises:
            OSError: the file cannot be made or its blocks allocated (a full disk).
        """
        path = database.with_name(f"{database.name}.{time.time_ns()}-{os.getpid()}-{next(_names)}{SUFFIX}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, size)
            else:  # pragma: no cover - not Linux
                os.ftruncate(fd, size)
            mapping = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        os.close(fd)  # the mapping keeps the file
        _prefault(mapping, min(prefault, size))
        return cls(path, mapping, size)

    def append(self, entry: bytes) -> bool:
        """Copy ``entry`` in after the last one; False (nothing copied) when it does not fit."""
        start = self.end
        end = start + len(entry)
        if end > self.size:
            return False
        self._map[start:end] = entry
        self.end = end
        return True

    def discard(self) -> None:
        """Unmap the journal and delete its file."""
        self._map.close()
        self.path.unlink(missing_ok=True)


#: ``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14): map pages for writing in one call.
_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23 if os.uname().sysname == "Linux" else None)


def _prefault(mapping: mmap.mmap, size: int) -> None:
    """Map the first ``size`` bytes' pages for writing, so that appends there take no page
    fault: with one ``madvise`` where the kernel has it, else by writing a zero to each."""
    if size <= 0:
        return
    if _POPULATE_WRITE is not None:
        try:
            mapping.madvise(_POPULATE_WRITE, 0, size)
            return
        except OSError:  # an older kernel
            pass
    for offset in range(0, size, mmap.PAGESIZE):
        mapping[offset] = 0


def frame(payload: bytes) -> bytes:
    """A journal entry holding ``payload``, which is not empty (see the module docstring)."""
    return _HEADER.pack(MARKER, len(payload), zlib.crc32(payload, len(payload))) + payload


def journal_paths(database: Path) -> list[Path]:
    """The journal files of ``database``, oldest first."""
    return sorted(database.parent.glob(f"{database.name}.*{SUFFIX}"))


def journal_format(path: Path) -> str:
    """What a journal holds, told by its first byte: ``"frames"`` (this version's),
    ``"lines"`` (JSON lines, an earlier version's: ``[``), ``"none"`` (a zero, or an empty
    file: nothing yet, or its first entry was cut short by a kill, and then it is the last
    one written: nothing in the file was acknowledged) or ``"foreign"``."""
    with path.open("rb") as f:
        first = f.read(1)
    if first == bytes([MARKER]):
        return "frames"
    if first == b"[":
        return "lines"
    return "none" if first in (b"", b"\0") else "foreign"


def read_frames(path: Path, start: int = 0) -> list[bytes]:
    """The payloads of the complete entries of a journal (see the module docstring) from
    byte ``start`` (the end of an entry).

    Raises:
        ValueError: a whole entry follows one that fails its CRC (damage, not a kill).
    """
    data = memoryview(path.read_bytes())
    payloads, at = [], start
    while at + _HEADER.size <= len(data):
        payload = _entry_at(data, at)
        if payload is None:
            marker, length, _ = _HEADER.unpack_from(data, at)
            if marker and _entry_at(data, at + _HEADER.size + length) is not None:  # a kill leaves nothing after
                raise ValueError(f"the entry at byte {at} fails its CRC and a whole one follows it")
            break  # the end (zeros), or the entry a kill cut short
        payloads.append(payload)
        at += _HEADER.size + len(payload)
    return payloads


def _entry_at(data: memoryview, at: int) -> bytes | None:
    """The payload of the whole entry at byte ``at`` of ``data``, or None (zeros, a cut or
    damaged entry, the end of the file)."""
    if at + _HEADER.size > len(data):
        return None
    marker, length, crc = _HEADER.unpack_from(data, at)
    payload = bytes(data[at + _HEADER.size : at + _HEADER.size + length])
    if marker != MARKER or not length or len(payload) != length or zlib.crc32(payload, length) != crc:
        return None
    return payload


def read_lines(path: Path, start: int = 0) -> list[bytes]:
    """The complete lines of a journal (see the module docstring) from byte ``start`` (the
    end of a line), without their newlines."""
    data = path.read_bytes()[start:]
    complete = data[: data.rfind(b"\n") + 1]
    return [line for line in complete.split(b"\n") if line and b"\0" not in line]


class DecisionJournal:
    """The journals of one database: decisions are appended to the current one; a spare is
    made ahead, off the request path; full ones are kept until what they hold is flushed.

    It does not know where decisions go: :meth:`take` hands the pending rows (and the full
    journals they make redundant) to whoever flushes them, and the caller discards those
    journals once the rows are stored. Thread-safe.

    Args:
        database: the database file the journals lie beside.
    """

    def __init__(self, database: Path) -> None:
        self.database = database
        self._lock = threading.Lock()
        self._current: Journal | None = None  # where decisions are appended
        self._spare: Journal | None = None  # the next one, made off the request path
        self._full: list[Journal] = []  # full ones, discarded once flushed
        self._pending: list[tuple[Any, ...]] = []  # journaled, not yet flushed
        self._closed = False

    @property
    def has_spare(self) -> bool:
        """Whether the next journal is made already."""
        return self._spare is not None

    def append(self, entry: bytes, row: tuple[Any, ...]) -> None:
        """Copy ``entry`` (one decision, a :func:`frame`) into the current journal, and keep
        ``row`` (the same decision as its store will flush it) until :meth:`take`.

        Raises:
            OSError: a new journal was needed and could not be made (a full disk).
        """
        with self._lock:
            journal = self._current
            if journal is None or not journal.append(entry):
                journal = self._next(len(entry))
                journal.append(entry)
            self._pending.append(row)

    def _next(self, need: int) -> Journal:
        """Retire the current journal (full) and start the spare or a new one; caller holds
        the lock."""
        if self._current is not None:
            self._full.append(self._current)
        spare, self._spare = self._spare, None
        if spare is None or spare.size < need:
            if spare is not None:
                self._full.append(spare)  # empty: discarded at the next flush
            spare = Journal.create(self.database, max(JOURNAL_BYTES, need))
        self._current = spare
        return spare

    def take(self) -> tuple[list[tuple[Any, ...]], list[Journal], dict[str, int]]:
        """The rows appended since the last call; the full journals that held only them and
        earlier rows (discard those once the rows are stored); and how far each journal
        that held any of them is taken (file name: bytes), which a store records with the
        rows so that a replay after a crash skips what was stored."""
        with self._lock:
            rows, self._pending = self._pending, []
            full, self._full = self._full, []
            ends = {j.path.name: j.end for j in (*full, self._current) if j is not None and j.end}
        return rows, full, ends

    def give_back(self, rows: list[tuple[Any, ...]], full: list[Journal]) -> None:
        """Return what :meth:`take` handed out and could not be stored: the next
        :meth:`take` hands it out again, before what was appended since."""
        with self._lock:
            self._pending[:0] = rows
            self._full[:0] = full

    def prepare_spare(self, prefault: int = 0) -> None:
        """Make the spare journal, if there is none, so that no append has to make one.

        Raises:
            OSError: it could not be made (a full disk).
        """
        with self._lock:
            if self._spare is not None or self._closed:
                return
        spare: Journal | None = Journal.create(self.database, prefault=prefault)
        with self._lock:
            if self._spare is None and not self._closed:
                spare, self._spare = None, spare
        if spare is not None:
            spare.discard()

    def close(self) -> None:
        """Discard the current and spare journals (take and store the pending rows first)."""
        with self._lock:
            self._closed = True
            left = [j for j in (self._current, self._spare) if j is not None]
            self._current = self._spare = None
        for journal in left:
            journal.discard()
