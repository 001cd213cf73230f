from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from handrail.recorder import Entry, Ledger
from handrail.recorder import _cli as recorder_cli
from tests.conftest import reap


def run_cli(argv: Sequence[str]) -> int:
    """Run through ``handrail.cli`` when it imports, else through this package's commands."""
    try:
        from handrail.cli import main

        return main(list(argv))
    except ImportError:
        parser = argparse.ArgumentParser(prog="handrail")
        recorder_cli.register(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(list(argv))
        code: int = args.func(args)
        return code


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        for i in range(5):
            ledger.intent("s1", f"a{i}", f"k{i}", "demo-agent", 1, {"action": "click"})
        ledger.intent("s2", "b", "kb", "other-agent", 1, {"action": "type"})
    return tmp_path


def test_verify_ok(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["ledger", "verify", "--data-dir", str(data_dir)]) == 0
    assert capsys.readouterr().out.strip() == ("ok: 6 entries, chain verified; head file: seq 6 matches")


def test_verify_bad(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = data_dir / "ledger.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER entries_no_update")
        conn.execute("UPDATE entries SET principal = 'someone-else' WHERE seq = 3")
    assert run_cli(["ledger", "verify", "--db", str(db)]) == 1
    assert capsys.readouterr().out.startswith("BAD at entry #3: ")


def test_verify_uses_env_data_dir(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HANDRAIL_DATA_DIR", str(data_dir))
    assert run_cli(["ledger", "verify"]) == 0
    assert "6 entries" in capsys.readouterr().out


def test_missing_ledger_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["ledger", "verify", "--data-dir", str(tmp_path / "nowhere")]) == 2
    assert "no ledger" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()


def test_tail(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["ledger", "tail", "--data-dir", str(data_dir), "-n", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["#4", "#5", "#6"]

    assert run_cli(["ledger", "tail", "--data-dir", str(data_dir), "--session", "s2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert "s=s2 act=b key=kb agent:other-agent" in lines[0]
    # a negative count printed nothing and succeeded; now it is the operator's one line
    for bad, says in (("-5", "-5 is negative: say how many entries to print"), ("x", "'x' is not a whole number")):
        with pytest.raises(SystemExit) as exit_:
            run_cli(["ledger", "tail", "--data-dir", str(data_dir), "-n", bad])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"error: argument -n: {says}")


def test_default_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HANDRAIL_DATA_DIR", raising=False)
    assert recorder_cli.ledger_path() == Path("handrail-data/ledger.sqlite")
    assert recorder_cli.ledger_path("x.db", "ignored") == Path("x.db")


@pytest.fixture
def story(tmp_path: Path) -> Path:
    """A ledger with two sessions, a done action, an UNKNOWN one and a reconcile."""
    db = tmp_path / "ledger.sqlite"
    with Ledger(db) as ledger:
        ledger.append(
            "session_open", session_id="s1", principal="agent-1", epoch=1,
            body={"target": "browser:shop"},
        )  # fmt: skip
        ledger.intent("s1", "a1", "k1", "agent-1", 1, {"action": "click", "ref": "e1"})
        ledger.result("s1", "a1", "k1", "agent-1", 1, "DONE", "ALLOW", "OBSERVED", True)
        ledger.intent("s1", "a2", "k2", "agent-1", 1, {"action": "click", "ref": "e2"})
        ledger.recover()
        ledger.lease_change("browser:shop", "takeover", "alice", "human", 2, session_id="s1")
        ledger.reconcile("s1", "a2", "alice", "DID_NOT_HAPPEN", "no order", principal_kind="human")
        ledger.intent("s2", "b1", "kb", "agent-2", 1, {"action": "type"})
    return db


def test_show_prints_the_action_and_its_session(story: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["ledger", "show", "a2", "--db", str(story)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("action a2: RECONCILED (DID_NOT_HAPPEN)\nsession s1: target browser:shop")
    assert "#1 session_open" in out
    assert "takeover browser:shop" in out
    assert "#4 intent" in out and "#5 result" in out and "#7 reconcile" in out
    assert '"reason":"RECOVERED"' in out
    assert "#2 intent" not in out  # another action

    assert run_cli(["ledger", "show", "a1", "--db", str(story)]) == 0
    assert capsys.readouterr().out.startswith("action a1: DONE (ALLOW)")
    assert run_cli(["ledger", "show", "b1", "--db", str(story)]) == 0
    assert "intent without a result" in capsys.readouterr().out
    assert run_cli(["ledger", "show", "zzz", "--db", str(story)]) == 1
    assert "no entries for action zzz" in capsys.readouterr().err


def test_export_jsonl(story: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["ledger", "export", "--format", "jsonl", "--db", str(story)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [row["seq"] for row in rows] == list(range(1, 9))
    with Ledger(story) as ledger:
        assert [Entry(**row) for row in rows] == ledger.entries()

    out = tmp_path / "out.jsonl"
    argv = ["ledger", "export", "--db", str(story), "-o", str(out), "--session", "s2"]
    assert run_cli(argv) == 0
    assert "1 entries written" in capsys.readouterr().err
    assert [json.loads(line)["action_id"] for line in out.read_text().splitlines()] == ["b1"]


@pytest.mark.parametrize(
    ("filters", "seqs"),
    [
        (["--session", "s1"], [1, 2, 3, 4, 5, 6, 7]),
        (["--principal", "alice"], [6, 7]),
        (["--outcome", "unknown"], [5]),
        (["--outcome", "DONE"], [3]),
        (["--kind", "intent"], [2, 4, 8]),
        (["--kind", "intent", "--principal", "agent-2"], [8]),
        (["--since", "1h"], [1, 2, 3, 4, 5, 6, 7, 8]),
        (["--since", "2999-01-01T00:00:00"], []),
    ],
)
def test_timeline_filters(story: Path, capsys: pytest.CaptureFixture[str], filters: list[str], seqs: list[int]) -> None:
    assert run_cli(["ledger", "timeline", "--db", str(story), *filters]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [int(line.split()[1][1:]) for line in lines[:-1]] == seqs
    assert lines[-1].startswith(f"-- {len(seqs)} entries")


def test_bad_since_is_an_error(story: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["ledger", "tail", "--db", str(story), "--since", "yesterday"]) == 2
    assert "--since 'yesterday'" in capsys.readouterr().err


def test_parse_since() -> None:
    assert recorder_cli.parse_since("90s", now_ms=100_000) == 10_000
    assert recorder_cli.parse_since("2m", now_ms=120_000) == 0
    assert recorder_cli.parse_since("1970-01-01T00:00:01") == 1000
    assert recorder_cli.parse_since("1970-01-01T01:00:01+01:00") == 1000


def test_verify_reports_a_truncated_tail(story: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with sqlite3.connect(story) as conn:
        conn.execute("DROP TRIGGER entries_no_delete")
        conn.execute("DELETE FROM entries WHERE seq > 6")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'head_seq'")
        (digest,) = conn.execute("SELECT entry_hash FROM entries WHERE seq = 6").fetchone()
        conn.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (digest,))
    assert run_cli(["ledger", "verify", "--db", str(story)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("BAD at entry #7: truncated: head file says seq 8 hash ")
    assert out.strip().endswith("database ends at seq 6")


def test_tail_follow_prints_new_entries_and_stops_on_sigterm(story: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "handrail", "ledger", "tail", "-f", "-n", "2", "--db", str(story)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert "#7 reconcile" in child.stdout.readline()
        assert "#8 intent" in child.stdout.readline()
        with Ledger(story) as ledger:
            ledger.intent("s2", "b2", "kb2", "agent-2", 1, {"action": "click"})
            ledger.result("s2", "b2", "kb2", "agent-2", 1, "DONE", "ALLOW", "OBSERVED", True)
        assert "#9 intent" in child.stdout.readline()
        assert "#10 result" in child.stdout.readline()
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == 0
        assert child.stdout.read() == ""
        assert child.stderr is not None
        assert child.stderr.read() == ""
    finally:
        reap(child)


def test_tail_follow_with_a_filter_stops_on_ctrl_c(story: Path) -> None:
    argv = ["ledger", "tail", "-f", "-n", "1", "--kind", "result", "--db", str(story)]
    child = subprocess.Popen([sys.executable, "-m", "handrail", *argv], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert "#5 result" in child.stdout.readline()  # it is following now
        with Ledger(story) as ledger:
            ledger.intent("s2", "b2", "kb2", "agent-2", 1, {"action": "click"})
            ledger.result("s2", "b2", "kb2", "agent-2", 1, "FAILED", "X", "NONE", False)
        assert "#10 result" in child.stdout.readline()
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


# --- a PostgreSQL ledger: every executor's chain ---------------------------------------------


@pytest.mark.slow
def test_the_commands_read_every_executors_chain_in_postgresql(
    pg_dsn: object, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from handrail.recorder import open_ledger

    dsn = pg_dsn()  # type: ignore[operator]
    monkeypatch.chdir(tmp_path)  # no ./handrail-data: no head files are read
    monkeypatch.delenv("HANDRAIL_DATA_DIR", raising=False)
    for exe, n in (("exe-a", 3), ("exe-b", 2)):
        with open_ledger(dsn, executor_id=exe, head_dir=tmp_path) as ledger:
            for i in range(n):
                ledger.intent("s1", f"{exe}-{i}", f"k{i}", "agent", 1, {"action": "click"})
    assert run_cli(["ledger", "verify", "--db", dsn]) == 0
    out = capsys.readouterr().out
    assert "executor exe-a: ok: 3 entries" in out and "executor exe-b: ok: 2 entries" in out
    assert "2 of 2 chains verified" in out
    # the commands only read: an executor with no chain is an error, and no chain is made
    assert run_cli(["ledger", "verify", "--db", dsn, "--executor", "nobody"]) == 2
    assert "no chain of executor 'nobody'" in capsys.readouterr().err
    from handrail.recorder._postgres import ledger_executors

    assert ledger_executors(dsn) == ["exe-a", "exe-b"]
    assert run_cli(["ledger", "timeline", "--db", dsn]) == 0
    out = capsys.readouterr().out
    assert out.count("[exe-a]") == 3 and out.count("[exe-b]") == 2 and "5 entries" in out and "2 executors" in out
    assert run_cli(["ledger", "export", "--db", dsn, "--executor", "exe-b"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["executor"], line["seq"]) for line in lines] == [("exe-b", 1), ("exe-b", 2)]
    # an entry in PostgreSQL hashes by the one formula of the SQLite ledger
    from handrail.recorder._chain import hash_columns

    row = lines[0]
    assert row["entry_hash"] == hash_columns(
        row["prev_hash"], row["seq"], row["ts_ms"], row["kind"], row["session_id"], row["action_id"],
        row["idempotency_key"], row["principal"], row["principal_kind"], row["epoch"],
        json.dumps(row["body"], sort_keys=True, separators=(",", ":")),
    )  # fmt: skip
    # an UPDATE is refused; an edit made around the triggers is found, in that chain only
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute("UPDATE ledger_entries SET principal = 'x' WHERE executor_id = 'exe-a' AND seq = 2")
        conn.execute("ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_no_change")
        conn.execute("UPDATE ledger_entries SET principal = 'x' WHERE executor_id = 'exe-a' AND seq = 2")
    assert run_cli(["ledger", "verify", "--db", dsn]) == 1
    out = capsys.readouterr().out
    assert "executor exe-a: BAD at entry #2: entry #2 was altered" in out and "executor exe-b: ok" in out
    assert run_cli(["ledger", "verify", "--db", "postgresql://handrail@127.0.0.1:1/nothing"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read the ledger database") and err.count("\n") == 1


@pytest.mark.slow
def test_verify_of_a_postgresql_ledger_checks_the_executors_head_files(
    pg_dsn: object, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: someone with the database's owner rights cuts the tail of one chain and
    moves its recorded head back to match. The database alone then verifies; the head file
    the executor kept in its data dir does not."""
    import psycopg

    from handrail.recorder import open_ledger

    dsn = pg_dsn()  # type: ignore[operator]
    heads = tmp_path / "handrail-data"
    for exe in ("exe-a", "exe-b"):
        with open_ledger(dsn, executor_id=exe, head_dir=heads) as ledger:
            for i in range(3):
                ledger.intent("s1", f"{exe}-{i}", f"k{i}", "agent", 1, {"action": "click"})
    assert sorted(p.name for p in heads.iterdir()) == ["ledger-exe-a.head", "ledger-exe-b.head"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE ledger_entries DISABLE TRIGGER USER")
        conn.execute("ALTER TABLE ledger_heads DISABLE TRIGGER USER")  # heads only move forward
        conn.execute("DELETE FROM ledger_entries WHERE executor_id = 'exe-a' AND seq = 3")
        conn.execute(
            "UPDATE ledger_heads SET head_seq = 2, head_hash = e.entry_hash FROM ledger_entries AS e"
            " WHERE ledger_heads.executor_id = 'exe-a' AND e.executor_id = 'exe-a' AND e.seq = 2"
        )
        conn.execute("ALTER TABLE ledger_entries ENABLE TRIGGER USER")
        conn.execute("ALTER TABLE ledger_heads ENABLE TRIGGER USER")
    monkeypatch.chdir(tmp_path / "..")  # no ./handrail-data here: only the database is read
    monkeypatch.delenv("HANDRAIL_DATA_DIR", raising=False)
    assert run_cli(["ledger", "verify", "--db", dsn]) == 0
    assert "executor exe-a: ok: 2 entries, chain verified; head file: none" in capsys.readouterr().out
    # with the executors' data dir: named, from the environment, or ./handrail-data by default
    for argv, cwd, env in (
        (["--data-dir", str(heads)], tmp_path / "..", ""),
        ([], tmp_path / "..", str(heads)),
        ([], tmp_path, ""),
    ):
        monkeypatch.chdir(cwd)
        if env:
            monkeypatch.setenv("HANDRAIL_DATA_DIR", env)
        else:
            monkeypatch.delenv("HANDRAIL_DATA_DIR", raising=False)
        assert run_cli(["ledger", "verify", "--db", dsn, *argv]) == 1
        out = capsys.readouterr().out
        assert "executor exe-a: BAD at entry #3: truncated: head file says seq 3" in out and "ends at seq 2" in out
        assert "executor exe-b: ok: 3 entries, chain verified; head file: seq 3 matches" in out
        assert "1 of 2 chains verified" in out
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --data-dir") and "no such folder" in err and err.count("\n") == 1
