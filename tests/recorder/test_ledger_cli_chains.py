"""``handrail ledger`` against what an attacker or a slip of the hand leaves: text that is
not UTF-8, chains that are bad, unreadable or deleted, and a database of many chains."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from handrail.recorder import Ledger, LedgerError
from handrail.recorder import _cli as recorder_cli
from tests.conftest import reap


def run_cli(argv: Sequence[str]) -> int:
    from handrail.cli import main

    return main(list(argv))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        ledger.intent("s1", "a1", "k1", "agent", 1, {"action": "click"})
        ledger.intent("s1", "a2", "k2", "agent", 1, {"action": "type"})
    return tmp_path / "ledger.sqlite"


# --- the operator's text: one line naming the option ------------------------------------------


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["verify", "--executor", "\udcff"], "--executor"),
        (["tail", "--executor", "exe\udcff"], "--executor"),
        (["show", "\udcff"], "ACTION_ID"),
        (["show", "a1", "--session", "\udcff"], "--session"),
        (["tail", "--session", "\udcff"], "--session"),
        (["timeline", "--kind", "\udcff"], "--kind"),
        (["export", "--principal", "\udcff"], "--principal"),
        (["timeline", "--outcome", "\udcff"], "--outcome"),
        (["tail", "--session", "s\x001"], "--session"),
    ],
)
def test_text_that_is_not_utf8_is_refused_naming_the_option(
    db: Path, argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A byte that is not UTF-8 in the command line arrives as a lone surrogate: it gave a
    traceback (--executor, ACTION_ID) or a line naming no option (the filters)."""
    with pytest.raises(SystemExit) as exit_:
        run_cli(["ledger", *argv, "--db", str(db)])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"error: argument {option}: " in last
    assert "UTF-8" in last or "NUL" in last


def test_an_empty_executor_and_a_count_past_64_bits_are_refused(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, says in (
        (["verify", "--executor", ""], "argument --executor: is empty"),
        (["tail", "-n", "99999999999999999999"], "argument -n: 99999999999999999999 is more than"),
    ):
        with pytest.raises(SystemExit) as exit_:
            run_cli(["ledger", *argv, "--db", str(db)])
        assert exit_.value.code == 2
        assert says in capsys.readouterr().err.strip().splitlines()[-1]
    assert run_cli(["ledger", "tail", "-n", str(2**63 - 1), "--db", str(db)]) == 0


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"body": {"note": "\udcff"}}, "body"),
        ({"body": {"\ud800": 1}}, "body"),
        ({"session_id": "s\udcff"}, "session_id"),
        ({"action_id": "\udcff"}, "action_id"),
        ({"idempotency_key": "\udcff"}, "idempotency_key"),
        ({"principal": "\udcff"}, "principal"),
    ],
)
def test_a_lone_surrogate_in_an_entry_is_an_invalid_argument(
    tmp_path: Path, fields: dict[str, Any], named: str
) -> None:
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        with pytest.raises(LedgerError, match=f"^{named} holds ") as error:
            ledger.append("decision", **fields)
        assert error.value.reason == "INVALID_ARGUMENT"
        with pytest.raises(LedgerError, match=r"^kind holds "):
            ledger.append("decision\udcff")
        assert ledger.head()[0] == 0
        assert ledger.verify().ok


def test_a_deleted_ledger_file_is_bad_by_its_head_file(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As with a PostgreSQL chain whose rows were deleted: the head file proves entries
    were there. Without a head file it stays "no ledger" (exit 2)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    assert run_cli(["ledger", "verify", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("BAD at entry #1: head file says seq 2 hash ")
    assert out.strip().endswith(f"there is no ledger at {db}")
    assert run_cli(["ledger", "tail", "--db", str(db)]) == 2
    assert capsys.readouterr().err == f"error: no ledger at {db}\n"
    db.with_name("ledger.sqlite.head").unlink()
    assert run_cli(["ledger", "verify", "--db", str(db)]) == 2
    assert capsys.readouterr().err == f"error: no ledger at {db}\n"


# --- a PostgreSQL ledger of several chains ----------------------------------------------------


def _chains(dsn: str, heads: Path, names: Sequence[str], n: int = 2) -> None:
    from handrail.recorder import open_ledger

    for exe in names:
        with open_ledger(dsn, executor_id=exe, head_dir=heads) as ledger:
            for i in range(n):
                ledger.intent("s1", f"{exe}-{i}", f"k{i}", "agent", 1, {"action": "click"})


@pytest.mark.slow
def test_verify_checks_every_chain_whatever_one_of_them_says(
    pg_dsn: Callable[[], str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain that cannot be read (exe-a) or whose head file is damaged (exe-b) is
    reported, and the others are still checked; the exit code is the worst."""
    dsn, heads = pg_dsn(), tmp_path / "data"
    _chains(dsn, heads, ["exe-a", "exe-b", "exe-c"])
    (heads / "ledger-exe-b.head").unlink()
    (heads / "ledger-exe-b.head").mkdir()
    real = Ledger.verify

    def verify(self: Ledger, **kw: Any) -> Any:
        if "(executor exe-a)" in self.location:
            raise LedgerError("cannot use ledger exe-a: server closed the connection unexpectedly")
        return real(self, **kw)

    monkeypatch.setattr(Ledger, "verify", verify)
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(heads)]) == 2
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("executor exe-b: BAD at the head file: head file ")
    assert lines[0].endswith("ledger-exe-b.head is damaged: it is a folder, not a file")
    assert lines[1:] == [
        "executor exe-c: ok: 2 entries, chain verified; head file: seq 2 matches",
        "1 of 3 chains verified",
    ]
    assert captured.err == "error: executor exe-a: cannot use ledger exe-a: server closed the connection unexpectedly\n"
    monkeypatch.setattr(Ledger, "verify", real)
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(heads)]) == 1
    assert "2 of 3 chains verified" in capsys.readouterr().out


@pytest.mark.slow
def test_the_commands_open_one_chain_at_a_time(
    pg_dsn: Callable[[], str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each open chain holds a connection pool: opening every chain at once ran a database
    of a few hundred chains out of connections ("sorry, too many clients already")."""
    dsn, heads = pg_dsn(), tmp_path / "data"
    names = [f"exe-{i}" for i in range(6)]
    _chains(dsn, heads, names)
    real = recorder_cli.open_ledger
    open_now: list[Ledger] = []
    most = 0

    def counted(*args: Any, **kw: Any) -> Ledger:
        nonlocal most
        ledger = real(*args, **kw)
        open_now.append(ledger)
        most = max(most, len(open_now))
        close = ledger.close

        def closed() -> None:
            open_now.remove(ledger)
            close()

        ledger.close = closed  # type: ignore[method-assign]
        return ledger

    monkeypatch.setattr(recorder_cli, "open_ledger", counted)
    location = ["--db", dsn, "--data-dir", str(heads)]
    assert run_cli(["ledger", "verify", *location]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "6 of 6 chains verified"
    assert run_cli(["ledger", "tail", "-n", "3", *location]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert run_cli(["ledger", "timeline", *location]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "-- 12 entries, 12 actions, 6 sessions, 6 executors"
    assert run_cli(["ledger", "export", *location]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(row["executor"], row["seq"]) for row in rows] == [(exe, seq) for exe in names for seq in (1, 2)]
    assert run_cli(["ledger", "show", "exe-4-1", *location]) == 0
    assert capsys.readouterr().out.startswith("executor exe-4\naction exe-4-1: intent without a result")
    assert most == 1 and not open_now


@pytest.mark.slow
def test_a_chain_whose_rows_were_deleted_is_bad_by_its_head_file(
    pg_dsn: Callable[[], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Delete a chain's entries and its head row: the database no longer names it, but its
    head file in the data dir does."""
    import psycopg

    dsn, heads = pg_dsn(), tmp_path / "data"
    _chains(dsn, heads, ["exe-1", "exe-2"], n=3)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # no triggers
        conn.execute("DELETE FROM ledger_entries WHERE executor_id = 'exe-1'")
        conn.execute("DELETE FROM ledger_heads WHERE executor_id = 'exe-1'")
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(heads)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("executor exe-1: BAD at entry #1: head file says seq 3 hash ")
    assert lines[0].endswith(", the database has no chain")
    assert lines[1:] == [
        "executor exe-2: ok: 3 entries, chain verified; head file: seq 3 matches",
        "1 of 2 chains verified",
    ]
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(heads), "--executor", "exe-1"]) == 1
    assert "executor exe-1: BAD at entry #1: head file says seq 3" in capsys.readouterr().out
    # a damaged head file of a deleted chain is bad too; no head file at all: no such chain
    (heads / "ledger-exe-1.head").write_bytes(b"\xff")
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(heads), "--executor", "exe-1"]) == 1
    assert "is damaged: not UTF-8 JSON" in capsys.readouterr().out
    (heads / "ledger-exe-1.head").unlink()
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(heads)]) == 0
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(heads), "--executor", "exe-1"]) == 2
    assert "no chain of executor 'exe-1'" in capsys.readouterr().err


@pytest.mark.slow
def test_tail_follow_of_a_database_shows_a_chain_begun_after_it_started(pg_dsn: Callable[[], str]) -> None:
    """``tail -f`` of a whole PostgreSQL ledger follows every chain: one an executor begins
    while it runs too (it read the list of chains once, and missed it)."""
    import signal
    import subprocess
    import sys

    from handrail.recorder import open_ledger

    dsn = pg_dsn()
    with open_ledger(dsn, executor_id="exe-old") as ledger:
        ledger.intent("s1", "a1", "k1", "agent", 1, {"action": "click"})
    child = subprocess.Popen(
        [sys.executable, "-m", "handrail", "ledger", "tail", "-f", "-n", "1", "--db", dsn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert "exe-old" in child.stdout.readline()  # following now
        with open_ledger(dsn, executor_id="exe-new") as ledger:
            ledger.intent("s9", "b1", "kb1", "agent", 1, {"action": "type"})
            ledger.intent("s9", "b2", "kb2", "agent", 1, {"action": "click"})
        lines = [child.stdout.readline(), child.stdout.readline()]
        assert all("exe-new" in line for line in lines), lines
        assert "#1 intent" in lines[0] and "#2 intent" in lines[1]
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == 0
    finally:
        reap(child)
