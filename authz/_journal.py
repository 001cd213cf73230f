"""The decision journal: a decision reaches the page cache before its answer is sent.

A journal is a file next to the database, allocated at a fixed size and mapped into memory
(``MAP_SHARED``). Appending a decision copies its line into the mapping: no system call,
and the bytes are in the page cache the moment the copy ends, so they survive ``kill -9``
of the process exactly as a ``write()`` would (not power loss or an OS crash: nothing is
fsynced). The blocks are allocated when the file is made, so a full disk shows up as an
error then, never as a fault while a decision is copied.

The file starts as zeros and every byte is written at most once, so a line cut short by a
kill holds zero bytes where it was not copied (its newline may have been copied first);
JSON text never holds a zero byte. :func:`read_lines` keeps the lines that end in a
newline and hold no zero byte: every line that was acknowledged, and only those.
"""

from __future__ import annotations

import itertools
import mmap
import os
import time
from pathlib import Path

#: The name every journal file ends with.
SUFFIX = ".decisions.journal"

#: How large a journal file is made (a decision line is about 1 KB).
JOURNAL_BYTES = 1 << 20

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
        for offset in range(0, min(prefault, size), mmap.PAGESIZE):
            mapping[offset] = 0
        return cls(path, mapping, size)

    def append(self, line: bytes) -> bool:
        """Copy ``line`` in after the last one; False (nothing copied) when it does not fit."""
        start = self.end
        end = start + len(line)
        if end > self.size:
            return False
        self._map[start:end] = line
        self.end = end
        return True

    def discard(self) -> None:
        """Unmap the journal and delete its file."""
        self._map.close()
        self.path.unlink(missing_ok=True)


def journal_paths(database: Path) -> list[Path]:
    """The journal files of ``database``, oldest first."""
    return sorted(database.parent.glob(f"{database.name}.*{SUFFIX}"))


def read_lines(path: Path) -> list[bytes]:
    """The complete lines of a journal (see the module docstring), without their newlines."""
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    return [line for line in complete.split(b"\n") if line and b"\0" not in line]
