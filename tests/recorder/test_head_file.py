"""Tampering with the tail: the head file outside the database catches what ``meta`` cannot."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from handrail.recorder import Ledger, LedgerTamperedError
from handrail.recorder._headfile import read_head_file
from handrail.recorder._sqlite import verify_file


def _fill(ledger: Ledger, n: int) -> None:
    for i in range(n):
        ledger.append("decision", session_id="s1", action_id=f"a{i}", body={"i": i})


def _raw(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute("DROP TRIGGER entries_no_delete")
    return conn


def _head_file(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((path.parent / (path.name + ".head")).read_text())
    return data


def test_head_file_is_written_on_close(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 7)
        head = ledger.head()
    assert ledger.head_path == ledger_path.with_name("ledger.sqlite.head")
    data = _head_file(ledger_path)
    assert (data["seq"], data["hash"]) == head
    assert not list(ledger_path.parent.glob("*.tmp"))  # the temp file was renamed away


def test_head_file_follows_appends_within_the_interval(ledger_path: Path) -> None:
    with Ledger(ledger_path, head_interval_s=0.05) as ledger:
        _fill(ledger, 3)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if ledger.head_path.exists() and _head_file(ledger_path)["seq"] == 3:
                break
            time.sleep(0.01)
        assert _head_file(ledger_path)["seq"] == 3


def test_head_file_is_written_at_once_after_head_every_entries(ledger_path: Path) -> None:
    with Ledger(ledger_path, head_interval_s=3600, head_every=10) as ledger:
        _fill(ledger, 1)  # the first write happens right away
        _fill(ledger, 25)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _head_file(ledger_path)["seq"] < 11:
            time.sleep(0.01)
        assert int(_head_file(ledger_path)["seq"]) >= 11  # type: ignore[call-overload]


def test_deleting_the_last_entry_is_detected(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 5)
        with _raw(ledger_path) as conn:
            conn.execute("DELETE FROM entries WHERE seq = 5")
        report = ledger.verify()
    assert not report.ok
    assert report.first_bad_seq == 5
    assert "truncated" in report.message


def test_truncation_with_meta_rewritten_is_caught_by_the_head_file(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 10)
        head6 = ledger.entries()[5]
    # The tamperer deletes the tail and fixes the in-database head to match.
    with _raw(ledger_path) as conn:
        conn.execute("DELETE FROM entries WHERE seq > 6")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'head_seq'")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (head6.entry_hash,))
    with Ledger(ledger_path) as ledger:
        report = ledger.verify()
        assert not report.ok
        assert report.first_bad_seq == 7
        assert report.message.startswith("truncated: head file says seq 10 hash ")
        assert report.message.endswith("database ends at seq 6")
        # Appending onto the truncated database does not overwrite the evidence ...
        _fill(ledger, 6)
    assert _head_file(ledger_path)["seq"] == 10
    # ... and the new entries #7..#10 do not match the recorded hash of #10.
    with Ledger(ledger_path) as ledger:
        report = ledger.verify()
    assert not report.ok
    assert report.first_bad_seq == 10
    assert report.message.startswith("replaced: head file says seq 10")


def test_restoring_an_older_copy_of_the_database_is_detected(ledger_path: Path) -> None:
    old = ledger_path.with_name("old.sqlite")
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 4)
    shutil.copy(ledger_path, old)  # closed: the WAL was checkpointed into the file
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 3)
    for suffix in ("-wal", "-shm"):
        Path(str(ledger_path) + suffix).unlink(missing_ok=True)
    shutil.copy(old, ledger_path)

    with Ledger(ledger_path) as ledger:
        report = ledger.verify()
    assert not report.ok
    assert "head file says seq 7" in report.message
    assert "database ends at seq 4" in report.message
    assert report.head_file == "seq 7 is past the end"


def test_a_damaged_head_file_is_reported(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 2)
    ledger_path.with_name("ledger.sqlite.head").write_text("{not json")
    with Ledger(ledger_path) as ledger:
        report = ledger.verify()
        assert not report.ok
        assert "damaged" in report.message
        _fill(ledger, 1)
    assert ledger_path.with_name("ledger.sqlite.head").read_text() == "{not json"


def test_without_a_head_file_verify_says_so(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 2)
    head = ledger_path.with_name("ledger.sqlite.head")
    head.unlink()
    # verify_file, not Ledger(): opening a Ledger would write the head file back.
    report = verify_file(ledger_path, head)
    assert report.ok
    assert report.head_file.startswith("none")


@pytest.mark.parametrize("n", [0, 1, 3])
def test_reopening_keeps_the_head_file_in_step(ledger_path: Path, n: int) -> None:
    with Ledger(ledger_path) as ledger:
        _fill(ledger, n)
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 2)
        assert ledger.verify().ok
    with Ledger(ledger_path) as ledger:
        report = ledger.verify()
    assert report.ok, report.message
    assert report.head_file == f"seq {n + 2} matches"


_HASH = "ab" * 32


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b'{"seq":1e400,"hash":"' + _HASH.encode() + b'"}', "seq inf is not a whole number"),
        (b'{"seq":true,"hash":"' + _HASH.encode() + b'"}', "seq True is not a whole number"),
        (b'{"seq":1.5,"hash":"' + _HASH.encode() + b'"}', "seq 1.5 is not a whole number"),
        (b'{"seq":"2","hash":"' + _HASH.encode() + b'"}', "seq '2' is not a whole number"),
        (b'{"seq":-1,"hash":"' + _HASH.encode() + b'"}', "seq -1 is not a whole number"),
        (b'{"seq":9223372036854775808,"hash":"' + _HASH.encode() + b'"}', "is not a whole number 0..2**63-1"),
        (b'{"seq":2,"hash":5}', "hash 5 is not 64 hex digits"),
        (b'{"seq":2,"hash":"' + b"z" * 64 + b'"}', "is not 64 hex digits"),
        (b"[1, 2]", "seq None"),
        (b"[" * 100_000, "not UTF-8 JSON"),
        (None, "it is a folder"),
    ],
    ids=[
        "not-utf8",
        "1e400",
        "bool",
        "float",
        "str",
        "negative",
        "2**63",
        "hash-int",
        "hash-hex",
        "list",
        "deep",
        "dir",
    ],
)
def test_a_damaged_head_file_is_reported_in_one_line(
    ledger_path: Path, content: bytes | None, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever is in the head file's place: reported as damaged, never a traceback, at
    open (the writer freezes, the evidence stays) and in ``handrail ledger verify``."""
    from handrail.cli import main

    with Ledger(ledger_path) as ledger:
        _fill(ledger, 2)
    head = ledger_path.with_name("ledger.sqlite.head")
    head.unlink()
    if content is None:
        head.mkdir()
    else:
        head.write_bytes(content)
    with pytest.raises(LedgerTamperedError, match=f"head file {head} is damaged: .*{re.escape(says)}"):
        read_head_file(head)
    with Ledger(ledger_path) as ledger:  # an executor opening its ledger
        assert ledger.verify().head_file == "damaged"
        _fill(ledger, 1)
    assert head.is_dir() if content is None else head.read_bytes() == content
    assert main(["ledger", "verify", "--db", str(ledger_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"BAD at the head file: head file {head} is damaged: ") and says in out
    assert out.count("\n") == 1
