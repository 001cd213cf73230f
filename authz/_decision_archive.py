"""The file ``handrail authz prune-decisions --archive`` appends pruned decisions to.

A prune hands each batch to :meth:`DecisionArchive.write` before deleting it, and deletes
only what was written and synced (:meth:`~._store_parts.StoreParts.prune_decisions`). So a
decision is never gone from both the log and the archive; a prune cut short after a write
writes those lines again next time (an id may repeat in the archive).

The file is JSON lines, one decision each::

    {"seq", "decision_id", "at_ms", "principal", "target", "reason", "record"}

``record`` is the decision log's own JSON of the decision (what ``explain`` reads), or its
text as stored when that is not JSON.

The file is the prune's output, and a prune may run as root: it is created mode 0600 (a
decision names URLs and elements), and refused when it is a symbolic link, not a regular
file (a FIFO would block the prune), or has other hard links. A line cut short (a write
that failed, or a prune killed mid-write) is cut off before anything is appended, so every
line of the file parses.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any


class DecisionArchive:
    """An archive file, open for appending.

    Raises:
        OSError: the file cannot be opened or created, or is not one this may write.
    """

    def __init__(self, path: str) -> None:
        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            self._fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
            created = True
        except FileExistsError:
            self._fd = os.open(path, flags)
            created = False
        try:
            info = os.fstat(self._fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(f"not a regular file ({stat.filemode(info.st_mode)})")
            if info.st_nlink != 1:
                raise OSError(f"has {info.st_nlink - 1} other hard link(s)")
            self._size = _complete_lines(self._fd, info.st_size)
            if created:  # the new name itself must survive a crash, as the lines do
                _sync_folder(Path(path).parent)
        except BaseException:
            os.close(self._fd)
            raise
        self.rows = 0

    def write(self, rows: list[tuple[Any, ...]]) -> None:
        """Append ``rows`` (``seq`` and the decision columns, as a prune reads them) and
        sync them; on any error, cut the file back to what it held before."""
        data = "".join(_line(row) + "\n" for row in rows).encode("utf-8")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except BaseException:
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)
        self.rows += len(rows)

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


def _line(row: tuple[Any, ...]) -> str:
    seq, decision_id, at_ms, principal, target, reason, record = row
    try:
        body = json.loads(record)
    except ValueError:
        body = str(record)
    parts = {
        "seq": seq,
        "decision_id": decision_id,
        "at_ms": at_ms,
        "principal": principal,
        "target": target,
        "reason": reason,
        "record": body,
    }
    return json.dumps(parts)


def _complete_lines(fd: int, size: int) -> int:
    """Cut a line left unfinished at the end of the file; the size that is left."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    if end != size:
        os.ftruncate(fd, end)
        os.fsync(fd)
    return end


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
