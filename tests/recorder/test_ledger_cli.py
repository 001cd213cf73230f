from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from handrail.recorder import Ledger
from handrail.recorder import _cli as recorder_cli


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
    assert capsys.readouterr().out.strip() == "ok: 6 entries, chain verified"


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


def test_default_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HANDRAIL_DATA_DIR", raising=False)
    assert recorder_cli.ledger_path() == Path("handrail-data/ledger.sqlite")
    assert recorder_cli.ledger_path("x.db", "ignored") == Path("x.db")
