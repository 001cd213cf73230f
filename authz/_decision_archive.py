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
file (a FIFO would block the prune), has other hard links, belongs to another user, may be
written by others, or holds anything but archive lines (a mistyped path must not be cut or
appended to). One prune at a time writes to a file (an exclusive ``flock``). A line cut
short (a write that failed, or a prune killed mid-write) is cut off before anything is
appended, so every line of the file parses.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Any


class DecisionArchive:
    """An archive file, open for appending (and locked) until :meth:`close`.

    Raises:
        OSError: the file cannot be opened or created, or is not one this may write.
    """

    def __init__(self, path: str) -> None:
        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:
            self._fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
            created = True
        except FileExistsError:
            self._fd = os.open(path, flags)
            created = False
        try:
            _check_file(self._fd)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OSError("another prune is writing to it") from None
            self._size = _archive_lines(self._fd, cut=True)
            if created:  # the new name itself must survive a crash, as the lines do
                _sync_folder(Path(path).parent)
        except BaseException:
            os.close(self._fd)
            raise
        self.rows = 0

    @staticmethod
    def check(path: str) -> None:
        """What opening ``path`` would refuse, refused without creating or changing
        anything (for a dry run).

        Raises:
            OSError: as the constructor would.
        """
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except FileNotFoundError:
            folder = Path(path).parent
            if not folder.is_dir():
                raise OSError(f"no folder {folder}") from None
            if not os.access(folder, os.W_OK):
                raise OSError(f"the folder {folder} is not writable") from None
            return
        try:
            _check_file(fd)
            _archive_lines(fd, cut=False)
        finally:
            os.close(fd)

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
        """Close the file (which lets go of its lock)."""
        os.close(self._fd)


def _check_file(fd: int) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"not a regular file ({stat.filemode(info.st_mode)})")
    if info.st_nlink != 1:
        raise OSError(f"has {info.st_nlink - 1} other hard link(s)")
    if info.st_uid != os.geteuid():
        raise OSError(f"belongs to user {info.st_uid}, not to this one ({os.geteuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise OSError(f"others may write to it ({stat.filemode(info.st_mode)})")


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


#: What every archive line starts with (``json.dumps`` of the dict :func:`_line` builds).
_LINE_START = b'{"seq": '

#: The longest unfinished line cut off a file taken for an archive.
_MAX_TAIL = 1 << 20


def _archive_lines(fd: int, *, cut: bool) -> int:
    """The size of the file's complete lines, after checking it is an archive (empty, or
    its last complete line is an archive line, and anything after it the start of one);
    ``cut``: cut that unfinished tail off.

    Raises:
        OSError: the file holds something else.
    """
    size = os.fstat(fd).st_size
    end = size
    while end > 0:  # the end of the last complete line
        start = max(0, end - 65536)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    tail = os.pread(fd, min(size - end, len(_LINE_START)), end)
    if size - end > _MAX_TAIL or not _LINE_START.startswith(tail[: len(_LINE_START)]):
        raise OSError("not a decision archive: it ends in something else than an archive line")
    if end:
        start = max(0, end - 1 - _MAX_TAIL)
        last = os.pread(fd, end - 1 - start, start).rsplit(b"\n", 1)[-1]
        try:
            parsed = json.loads(last)
        except ValueError:
            parsed = None
        if not (isinstance(parsed, dict) and {"seq", "decision_id", "record"} <= parsed.keys()):
            raise OSError("not a decision archive: its last line is not an archive line")
    if cut and end != size:
        os.ftruncate(fd, end)
        os.fsync(fd)
    return end


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
