"""Decision-log retention: ``handrail authz prune-decisions`` on both stores, while a sidecar
keeps serving, and the walk that decides what goes."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handrail.authz import NotFoundError, SqliteStore, _cli
from handrail.authz._cli_commands import _pruning, open_store
from handrail.authz._errors import AuthzError
from handrail.authz._models import CheckInput, Decision, DecisionRecord
from handrail.authz._sqlite_schema import decision_record
from handrail.authz._store_parts import StoreParts
from tests.authz.conftest import Sidecar

TARGET = "browser:1"
ORIGIN = "https://shop.test"
DAY_MS = 86_400_000


def _check(s: Sidecar, n: int) -> str:
    """One allowed check at the sidecar's clock (the lease taken again when it lapsed)."""
    lease = s.client("exe").get_lease(TARGET)
    epoch = lease.epoch
    if lease.holder != "agent-a" or lease.expires_at_ms <= s.clock.now:
        epoch = s.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    d = s.client("exe").check("agent-a", TARGET, epoch, "submit", url=f"{ORIGIN}/cart?n={n}", action_id=f"act-{n}")
    assert d.allow
    return d.decision_id


def _logged(s: Sidecar) -> list[str]:
    return [r.decision_id for r in s.client("op").list_decisions(limit=1000)]


def _seeded(sidecar: Sidecar, ages_days: list[float]) -> list[str]:
    """One check per age (in days before the real now), oldest first; their decision ids."""
    real_now = time.time_ns() // 1_000_000
    sidecar.clock.now = real_now - int(max(ages_days) * DAY_MS) - 1000
    sidecar.client("op").grant("agent-a", TARGET, ["submit"], [ORIGIN])
    ids = []
    for n, age in enumerate(ages_days):
        sidecar.clock.now = real_now - int(age * DAY_MS)
        ids.append(_check(sidecar, n))
    sidecar.clock.now = real_now
    return ids


def test_prune_cli_deletes_only_what_is_older_and_says_how_many(
    sidecar: Sidecar, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _seeded(sidecar, [100, 100, 100, 40, 10, 10, 0.01])
    old, mid, recent = ids[:3], ids[3:6], ids[6:]
    before = _logged(sidecar)
    assert set(ids) <= set(before)
    args = ["authz", "prune-decisions", *sidecar.store_args]

    assert _cli.main([*args, "--older-than", "60d", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("would prune 3 decisions logged before ")
    assert _logged(sidecar) == before  # a dry run deletes nothing

    assert _cli.main([*args, "--older-than", "60d"]) == 0
    assert capsys.readouterr().out.startswith("pruned 3 decisions logged before ")
    left = _logged(sidecar)
    assert not set(old) & set(left) and set(mid + recent) <= set(left)
    with pytest.raises(NotFoundError):
        sidecar.client("op").explain_decision(old[0])

    assert _cli.main([*args, "--older-than", "60d"]) == 0  # again: nothing more is that old
    assert capsys.readouterr().out.startswith("pruned 0 decisions ")

    assert _cli.main([*args, "--older-than", "2d"]) == 0
    assert capsys.readouterr().out.startswith("pruned 3 decisions ")
    assert set(recent) <= set(_logged(sidecar))
    assert sidecar.client("op").explain_decision(recent[0])[0].decision_id == recent[0]
    assert _check(sidecar, 99) == _logged(sidecar)[0]  # the log goes on, newest first


@pytest.mark.parametrize(
    ("age", "says"),
    [
        ("12h", "decisions younger than a day are kept"),
        ("0d", "decisions younger than a day are kept"),
        ("2099-01-01T00:00Z", "decisions younger than a day are kept"),
        ("banana", "is neither a duration (10m, 2h, 1d) nor an ISO time"),
        ("30", "is neither a duration"),
        ("1000000d", "reaches before 1970"),
        ("9" * 400 + "d", "is longer than any log"),
    ],
)
def test_prune_refuses_an_age_that_reaches_the_last_day_or_is_no_age(
    sidecar: Sidecar, capsys: pytest.CaptureFixture[str], age: str, says: str
) -> None:
    ids = _seeded(sidecar, [0.001, 0.0001])
    assert _cli.main(["authz", "prune-decisions", *sidecar.store_args, "--older-than", age]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --older-than: ") and says in err and err.count("\n") == 1
    assert set(ids) <= set(_logged(sidecar))  # lost nothing


def test_prune_keeps_the_newest_decision_so_the_sequence_counts_on(
    sidecar: Sidecar, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every decision is older than the cutoff: all go but the newest, and the log goes on
    after it."""
    _seeded(sidecar, [100, 90, 80])
    logged = _logged(sidecar)
    assert _cli.main(["authz", "prune-decisions", *sidecar.store_args, "--older-than", "30d"]) == 0
    assert capsys.readouterr().out.startswith(f"pruned {len(logged) - 1} decisions ")
    assert _logged(sidecar) == [logged[0]]
    assert _check(sidecar, 7) == _logged(sidecar)[0]


def test_prune_in_batches_while_the_sidecar_checks(sidecar: Sidecar) -> None:
    """A prune of thousands of old decisions, five rows per transaction, while checks go
    on from two threads: every check is answered and logged, nothing newer is touched."""
    _seeded(sidecar, [50])
    store = sidecar.server.store
    real_now = sidecar.clock.now
    sidecar.clock.now = real_now - 50 * DAY_MS
    for n in range(300):  # old decisions, straight into the log
        _check(sidecar, 1000 + n)
    sidecar.clock.now = real_now
    _check(sidecar, 5000)  # the newest when the prune begins: kept in any case
    flush = getattr(store, "flush_decisions", None)
    if flush is not None:
        flush()  # a SQLite sidecar's journal: into the table, where another process sees them
    total = len(_logged(sidecar))
    made: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def checks(base: int) -> None:
        try:
            n = base
            while not stop.is_set():
                made.append(_check(sidecar, n))
                n += 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=checks, args=(k * 100_000,)) for k in (1, 2)]
    for t in threads:
        t.start()
    other = open_store(str(sidecar.data_dir), getattr(store, "dsn", ""))
    try:
        pruned = other.prune_decisions(real_now - 10 * DAY_MS, batch=5)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        other.close()
    assert not errors
    assert pruned == 301  # the 300 and the first seeded one
    assert len(made) > 0
    left = set(_logged(sidecar))
    assert set(made) <= left
    assert len(left) == total - 301 + len(made)


def test_prune_archives_what_it_deletes_first(
    sidecar: Sidecar, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _seeded(sidecar, [100, 90, 80, 0.01])
    old = ids[:3]
    urls = {d: sidecar.client("op").explain_decision(d)[0].request.url for d in old}
    archive = tmp_path / "decisions.jsonl"
    args = ["authz", "prune-decisions", *sidecar.store_args, "--older-than", "30d", "--archive", str(archive)]
    assert _cli.main(args) == 0
    assert capsys.readouterr().out.strip().endswith(f"archived to {archive}")
    lines = [json.loads(line) for line in archive.read_text().splitlines()]
    assert [line["decision_id"] for line in lines] == old  # in the log's order
    assert archive.stat().st_mode & 0o777 == 0o600  # decisions name URLs and elements
    for line in lines:  # the archived record is what explain reads
        row = (line["decision_id"], line["at_ms"], line["principal"], line["target"], line["reason"])
        record = decision_record((*row, json.dumps(line["record"])))
        assert record.request.url == urls[line["decision_id"]] and record.caller == "exe"
    assert not set(old) & set(_logged(sidecar))

    sidecar.clock.now -= 50 * DAY_MS
    again = _check(sidecar, 50)
    sidecar.clock.now += 50 * DAY_MS
    _check(sidecar, 51)
    flush = getattr(sidecar.server.store, "flush_decisions", None)
    if flush is not None:
        flush()
    assert _cli.main(args) == 0  # a second prune appends
    assert [json.loads(line)["decision_id"] for line in archive.read_text().splitlines()] == [*old, again]


_REFUSED = {
    "/dev/full": "not a regular file",  # a full disk: the size-limit test below
    "no-such-dir/decisions.jsonl": "No such file or directory",
    "link": "Too many levels of symbolic links",
    "fifo": "not a regular file",
    "hardlink": "other hard link",
    "text": "not a decision archive",
    "database": "not a decision archive",
    "others-may-write": "others may write to it",
    "another-users": "belongs to user 65534",
    "in-use": "another prune is writing to it",
}


@pytest.mark.parametrize("where", list(_REFUSED))
def test_an_archive_that_cannot_be_written_deletes_nothing(
    sidecar: Sidecar, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """A full disk, a missing folder, and what may be planted where the archive goes or
    typed by mistake: a symbolic or a hard link to a file the prune's user may write, a
    FIFO (the prune must not hang on it), a text file or a database (neither is cut or
    appended to), a file others may write or another user owns, and an archive another
    prune is writing."""
    if where == "another-users" and os.geteuid() != 0:
        pytest.skip("giving a file away takes root")
    ids = _seeded(sidecar, [100, 90, 0.01])
    path = where if where.startswith("/") else str(tmp_path / where)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    held = None
    if where == "link":
        Path(path).symlink_to(victim)
    elif where == "hardlink":
        os.link(victim, path)
    elif where == "fifo":
        os.mkfifo(path)
    elif where == "text":
        Path(path).write_text("key = value\nlast line, no newline")
    elif where == "database":
        shutil.copy(sidecar.data_dir / "authz.sqlite" if sidecar.store_args[0] == "--data-dir" else __file__, path)
    elif where in ("others-may-write", "another-users", "in-use"):
        Path(path).write_text(json.dumps({"seq": 1, "decision_id": "d", "record": []}) + "\n")
        os.chmod(path, 0o620 if where == "others-may-write" else 0o600)
        if where == "another-users":
            os.chown(path, 65534, 65534)
        if where == "in-use":
            held = os.open(path, os.O_RDONLY)
            fcntl.flock(held, fcntl.LOCK_EX)
    before = Path(path).read_bytes() if Path(path).is_file() and where != "link" else None
    args = ["authz", "prune-decisions", *sidecar.store_args, "--older-than", "30d", "--archive", path]
    assert _cli.main(args) == 1
    err = capsys.readouterr().err
    if held is not None:
        os.close(held)
    assert err.startswith(f"error: --archive: {path}: ") and err.count("\n") == 1
    assert _REFUSED[where] in err
    assert set(ids) <= set(_logged(sidecar))
    assert victim.read_text() == "precious\n"
    if before is not None:
        assert Path(path).read_bytes() == before  # not cut, not appended to


def test_a_dry_run_says_what_the_archive_would_refuse(
    sidecar: Sidecar, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _seeded(sidecar, [100, 0.01])
    args = ["authz", "prune-decisions", *sidecar.store_args, "--older-than", "30d", "--dry-run", "--archive"]
    assert _cli.main([*args, str(tmp_path / "no-such-dir" / "a.jsonl")]) == 1
    assert "no folder" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("not decisions\n")
    assert _cli.main([*args, str(tmp_path / "notes.txt")]) == 1
    assert "not a decision archive" in capsys.readouterr().err
    assert _cli.main([*args, str(tmp_path / "a.jsonl")]) == 0
    assert capsys.readouterr().out.strip().endswith(f"to be archived to {tmp_path / 'a.jsonl'}")
    assert not (tmp_path / "a.jsonl").exists() and set(ids) <= set(_logged(sidecar))


def test_a_batch_whose_archive_fails_stays(sidecar: Sidecar) -> None:
    """The archive fails at the second batch: the first is archived and gone, the rest
    (that batch included) still logged."""
    ids = _seeded(sidecar, [100, 99, 98, 97, 96, 0.01])
    kept: list[list[str]] = []

    def keep(rows: list[tuple[Any, ...]]) -> None:
        if kept:
            raise OSError(28, "No space left on device")
        kept.append([r[1] for r in rows])

    store = sidecar.server.store
    flush = getattr(store, "flush_decisions", None)
    if flush is not None:
        flush()
    with pytest.raises(OSError):
        store.prune_decisions(time.time_ns() // 1_000_000 - 30 * DAY_MS, batch=2, keep=keep)
    logged = set(_logged(sidecar))
    assert kept == [ids[:2]] and not set(ids[:2]) & logged and set(ids[2:]) <= logged


def test_an_empty_archive_name_is_refused(sidecar: Sidecar, capsys: pytest.CaptureFixture[str]) -> None:
    """``--archive "$ARCHIVE"`` with the variable unset must not prune without archiving."""
    ids = _seeded(sidecar, [100, 0.01])
    with pytest.raises(SystemExit) as ended:
        _cli.main(["authz", "prune-decisions", *sidecar.store_args, "--older-than", "30d", "--archive", ""])
    assert ended.value.code == 2 and "--archive needs a file name" in capsys.readouterr().err
    assert set(ids) <= set(_logged(sidecar))


def test_a_write_cut_short_leaves_whole_lines_and_loses_nothing(
    sidecar: Sidecar, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The prune's files may only grow so far (``RLIMIT_FSIZE``), and the archive, already
    near that size, reaches it in the middle of a line of the third batch. The partial line
    is cut off, that batch stays in the log, and a second prune with room archives the
    rest: every line parses, every pruned id is in the file once."""
    ids = _seeded(sidecar, [100] * 40 + [0.01])
    flush = getattr(sidecar.server.store, "flush_decisions", None)
    if flush is not None:
        flush()
    archive = tmp_path / "decisions.jsonl"
    limit = 8 * 1024 * 1024  # the store's own files stay below it
    filler = json.dumps({"seq": 0, "decision_id": "earlier", "record": "x" * 1000}) + "\n"
    archive.write_text(filler * ((limit - 12_000) // len(filler)))
    filled = len(archive.read_text().splitlines())
    command = [sys.executable, "-m", "handrail", "authz", "prune-decisions", *sidecar.store_args]
    command += ["--older-than", "30d", "--archive", str(archive), "--batch", "5"]

    # a file size limit, and EFBIG rather than a signal, both kept across exec (no
    # preexec_fn: a fork of this threaded process must exec at once)
    limited = (
        "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); os.execv(sys.argv[1], sys.argv[1:])"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cut = subprocess.run(
        [sys.executable, "-c", limited, *command], capture_output=True, text=True, timeout=120, env=env
    )
    assert cut.returncode == 1, cut.stderr
    assert cut.stderr.startswith(f"error: --archive: {archive}: File too large (10 decisions archived")
    assert cut.stderr.count("\n") == 1
    first = [json.loads(line)["decision_id"] for line in archive.read_text().splitlines()[filled:]]
    assert first == ids[:10] and archive.read_bytes().endswith(b"\n")
    assert set(ids[10:]) <= set(_logged(sidecar)) and not set(first) & set(_logged(sidecar))

    with archive.open("ab") as f:  # and a prune killed mid-line before: its tail is cut first
        f.write(b'{"seq": 12, "decision_')
    again = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0, again.stderr
    lines = [json.loads(line) for line in archive.read_text().splitlines()[filled:]]
    assert [line["decision_id"] for line in lines] == ids[:40]
    assert not set(_logged(sidecar)) & set(ids[:40])


def test_a_database_error_while_pruning_is_one_line(tmp_path: Path) -> None:
    """SQLite: another process takes the write lock after the prune opened the store, and
    holds it for longer than the prune waits."""
    data = tmp_path / "data"
    now = time.time_ns() // 1_000_000
    with SqliteStore.in_dir(data, clock=lambda: now - 100 * DAY_MS) as old:
        for _ in range(3):
            did = old.new_decision_id()
            request = CheckInput("agent-a", TARGET, 1, "submit")
            old.record_decision(
                DecisionRecord(did, now - 100 * DAY_MS, "exe", request, Decision(True, "ALLOW", "", did))
            )
    store = open_store(str(data))
    holder = sqlite3.connect(data / "authz.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(AuthzError) as failed:
            _pruning(store, now - 30 * DAY_MS)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(failed.value) == "the store: database is locked (what was pruned before it stays pruned)"
    assert store.count_decisions() == 3
    store.close()


_SIDECAR = """
import sys, time
from handrail.authz import SqliteStore
from handrail.authz._models import CheckInput, Decision, DecisionRecord
store = SqliteStore.in_dir(sys.argv[1], journal=True)
now = time.time_ns() // 1_000_000
for age in (5, 5, 5, 0):
    did = store.new_decision_id()
    store.record_decision(DecisionRecord(did, now - age * 86_400_000, "exe",
        CheckInput("agent-a", "browser:1", 1, "submit"), Decision(True, "ALLOW", "ok", did)))
store.flush_decisions()  # in the file now; the journal keeps its lines until it is full
did = store.new_decision_id()  # and one as old, journaled and not flushed when it dies
store.record_decision(DecisionRecord(did, now - 5 * 86_400_000, "exe",
    CheckInput("agent-a", "browser:1", 1, "submit"), Decision(True, "ALLOW", "ok", did)))
print(did, flush=True)
time.sleep(120)
"""


def test_a_crashed_sidecar_does_not_bring_pruned_decisions_back(tmp_path: Path) -> None:
    """A SQLite sidecar journals decisions and flushes them; a prune deletes the old ones;
    the sidecar is killed (-9) and restarted. Its journal still holds the pruned lines:
    they stay pruned. It also held one as old that it never flushed (no prune saw it):
    that one comes back."""
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    sidecar = subprocess.Popen([sys.executable, "-c", _SIDECAR, str(data)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert sidecar.stdout is not None
        unflushed = sidecar.stdout.readline().strip()
        with SqliteStore.in_dir(data) as store:
            assert store.count_decisions() == 4
            assert store.prune_decisions(time.time_ns() // 1_000_000 - 2 * DAY_MS) == 3
    finally:
        sidecar.kill()
        sidecar.wait(10)
        if sidecar.stdout is not None:
            sidecar.stdout.close()
    assert list(data.glob("authz.sqlite.*")), "the journal is there to replay"
    with SqliteStore.in_dir(data, journal=True) as restarted:
        assert restarted.count_decisions() == 2
        assert restarted.get_decision(unflushed).at_ms < time.time_ns() // 1_000_000 - 4 * DAY_MS
        assert not list(data.glob("authz.sqlite.*.journal"))  # replayed and gone


# --- the walk, on a log in memory -------------------------------------------------------------


class _MemoryLog:
    """The decisions part's prune calls over a list of ``(seq, at_ms)``."""

    def __init__(self, at_ms: list[int]) -> None:
        self.log = [(seq, at) for seq, at in enumerate(at_ms, start=1)]
        self.deleted: list[tuple[int, int]] = []
        self.prune_batch = 3

    def top(self) -> int:
        return self.log[-1][0] if self.log else 0

    def window(self, after: int, below: int, limit: int) -> list[tuple[int, int]]:
        return [r for r in self.log if after < r[0] < below][:limit]

    def rows(self, after: int, upto: int, before_ms: int) -> list[tuple[int, int]]:
        return [r for r in self.log if after < r[0] <= upto and r[1] < before_ms]

    def delete(self, after: int, upto: int, before_ms: int) -> int:
        return self._drop(self.rows(after, upto, before_ms))

    def delete_seqs(self, seqs: list[int], before_ms: int) -> int:
        return self._drop([r for r in self.log if r[0] in seqs and r[1] < before_ms])

    def drop_spent(self, before_ms: int) -> int:
        return 0  # no allows kept for a resend here (authz/_replay.py; tests/authz/test_check_replay.py)

    def _drop(self, gone: list[tuple[int, int]]) -> int:
        self.log = [r for r in self.log if r not in gone]
        self.deleted += gone
        return len(gone)


class _Parts(StoreParts):
    def __init__(self, log: _MemoryLog) -> None:
        self._decisions = log  # type: ignore[assignment]


def test_only_what_the_archive_took_is_deleted() -> None:
    """An old decision that becomes visible between a batch's read and its delete (a
    commit late in a sequence's order) was not archived: it is left for the next prune."""
    log = _MemoryLog([0, 0, 0, 100])
    log.log = [(1, 0), (3, 0), (5, 0), (9, 100)]
    read = log.rows

    def rows_then_a_late_commit(after: int, upto: int, before_ms: int) -> list[tuple[int, int]]:
        found = read(after, upto, before_ms)
        if (2, 0) not in log.log:
            log.log = sorted([*log.log, (2, 0)])
        return found

    log.rows = rows_then_a_late_commit  # type: ignore[method-assign]
    kept: list[tuple[Any, ...]] = []
    assert _Parts(log).prune_decisions(50, batch=10, keep=kept.extend) == 3
    assert kept == [(1, 0), (3, 0), (5, 0)] and log.log == [(2, 0), (9, 100)]


@settings(max_examples=300, deadline=None)
@given(
    at_ms=st.lists(st.integers(0, 50), max_size=60),
    before=st.integers(0, 55),
    batch=st.integers(1, 7),
    ordered=st.booleans(),
)
def test_walk_deletes_only_older_never_the_newest_and_all_when_in_order(
    at_ms: list[int], before: int, batch: int, ordered: bool
) -> None:
    if ordered:
        at_ms = sorted(at_ms)
    log = _MemoryLog(at_ms)
    newest = log.log[-1] if log.log else None
    counted = _Parts(_MemoryLog(at_ms)).prune_decisions(before, dry_run=True, batch=batch)
    kept: list[tuple[Any, ...]] = []
    pruned = _Parts(log).prune_decisions(before, batch=batch, keep=kept.extend)
    plain = _MemoryLog(at_ms)
    assert _Parts(plain).prune_decisions(before, batch=batch) == pruned == len(log.deleted) == counted
    assert kept == log.deleted == plain.deleted  # an archive gets exactly what goes, in order
    assert all(at < before for _, at in log.deleted)
    assert newest is None or newest in log.log
    if ordered:  # in order of time, everything older goes but the newest
        assert [r for r in log.log if r[1] < before and r != newest] == []
