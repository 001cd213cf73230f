from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from handrail.recorder import (
    GENESIS_HASH,
    REDACTED,
    Ledger,
    LedgerError,
    LedgerTamperedError,
    canonical_json,
    entry_hash,
    timeline,
)


def _fill(ledger: Ledger, n: int) -> None:
    for i in range(n):
        ledger.append(
            "decision",
            session_id="s1",
            action_id=f"a{i}",
            principal="demo-agent",
            epoch=1,
            body={"i": i, "text": f"entry {i}"},
        )


def _raw(path: Path) -> sqlite3.Connection:
    """A raw connection with the append-only triggers removed, as a tamperer would."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute("DROP TRIGGER entries_no_delete")
    return conn


def test_append_and_read_round_trip(ledger: Ledger) -> None:
    first = ledger.append(
        "session_open",
        session_id="s1",
        principal="executor",
        principal_kind="system",
        body={"backend": "browser", "ünïcode": "日本"},
    )
    second = ledger.intent("s1", "a1", "k1", "demo-agent", 3, {"action": "click", "ref": "e12"})

    assert first.seq == 1
    assert first.prev_hash == GENESIS_HASH
    assert second.seq == 2
    assert second.prev_hash == first.entry_hash
    assert ledger.head() == (2, second.entry_hash)
    assert ledger.count() == 2

    stored = ledger.entries()
    assert stored == [first, second]
    assert stored[0].body == {"backend": "browser", "ünïcode": "日本"}
    assert stored[1].body == {"params": {"action": "click", "ref": "e12"}}
    assert stored[1].principal_kind == "agent"
    assert stored[1].epoch == 3


def test_entries_filters(ledger: Ledger) -> None:
    ledger.intent("s1", "a1", "k1", "agent-1", 1, {"action": "click"})
    ledger.result("s1", "a1", "k1", "agent-1", 1, "succeeded", "OK", "observed", True)
    ledger.intent("s2", "a2", "k2", "agent-2", 1, {"action": "type"})

    assert [e.seq for e in ledger.entries(session_id="s1")] == [1, 2]
    assert [e.seq for e in ledger.entries(kind="intent")] == [1, 3]
    assert [e.seq for e in ledger.entries(action_id="a2")] == [3]
    assert [e.seq for e in ledger.entries(since_seq=1)] == [2, 3]
    assert [e.seq for e in ledger.entries(limit=2)] == [1, 2]
    assert [e.seq for e in ledger.tail(2)] == [2, 3]
    assert [e.seq for e in ledger.tail(5, session_id="s2")] == [3]


def test_hash_matches_the_specified_formula(ledger: Ledger) -> None:
    entry = ledger.append("decision", body={"b": [1, 2, {"z": None}], "a": 'é "q"\n'})
    expected = entry_hash(entry.prev_hash, entry.hashed_fields())
    assert entry.entry_hash == expected
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'


def test_chain_verifies_and_survives_reopen(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 10)
    with Ledger(ledger_path) as ledger:
        _fill(ledger, 5)
        report = ledger.verify()
        assert report.ok
        assert report.count == 15
        assert report.first_bad_seq is None
        assert ledger.check().ok


def test_empty_ledger_verifies(ledger: Ledger) -> None:
    report = ledger.verify()
    assert report.ok
    assert report.count == 0
    assert ledger.head() == (0, GENESIS_HASH)


def test_edited_entry_is_detected(ledger: Ledger, ledger_path: Path) -> None:
    _fill(ledger, 10)
    with _raw(ledger_path) as conn:
        conn.execute("""UPDATE entries SET body = '{"i":6,"text":"forged"}' WHERE seq = 7""")

    report = ledger.verify()
    assert not report.ok
    assert report.first_bad_seq == 7
    assert report.count == 6
    assert "altered" in report.message
    with pytest.raises(LedgerTamperedError) as caught:
        ledger.check()
    assert caught.value.seq == 7
    assert caught.value.reason == "LEDGER_TAMPERED"


def test_edited_column_is_detected(ledger: Ledger, ledger_path: Path) -> None:
    _fill(ledger, 5)
    with _raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET epoch = 99 WHERE seq = 2")
    assert ledger.verify().first_bad_seq == 2


def test_deleted_entry_is_detected(ledger: Ledger, ledger_path: Path) -> None:
    _fill(ledger, 10)
    with _raw(ledger_path) as conn:
        conn.execute("DELETE FROM entries WHERE seq = 4")

    report = ledger.verify()
    assert not report.ok
    assert report.first_bad_seq == 4
    assert "missing" in report.message


def test_deleted_and_renumbered_entries_are_detected(ledger: Ledger, ledger_path: Path) -> None:
    _fill(ledger, 6)
    with _raw(ledger_path) as conn:
        conn.execute("DELETE FROM entries WHERE seq = 3")
        conn.execute("UPDATE entries SET seq = seq - 1 WHERE seq > 3")

    report = ledger.verify()
    assert not report.ok
    assert report.first_bad_seq == 3


def test_truncated_tail_is_detected_even_after_more_appends(ledger: Ledger, ledger_path: Path) -> None:
    _fill(ledger, 5)
    with _raw(ledger_path) as conn:
        conn.execute("DELETE FROM entries WHERE seq = 5")
    report = ledger.verify()
    assert not report.ok
    assert report.first_bad_seq == 5

    # Appends chain onto the recorded head, so the hole stays visible.
    _fill(ledger, 1)
    assert ledger.verify().first_bad_seq == 5


def test_reordered_pair_is_detected(ledger: Ledger, ledger_path: Path) -> None:
    _fill(ledger, 10)
    with _raw(ledger_path) as conn:
        b4, b5 = (conn.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()[0] for seq in (4, 5))
        conn.execute("UPDATE entries SET body = ? WHERE seq = 4", (b5,))
        conn.execute("UPDATE entries SET body = ? WHERE seq = 5", (b4,))

    report = ledger.verify()
    assert not report.ok
    assert report.first_bad_seq == 4


def test_swapped_whole_rows_are_detected(ledger: Ledger, ledger_path: Path) -> None:
    _fill(ledger, 6)
    with _raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET seq = -1 WHERE seq = 2")
        conn.execute("UPDATE entries SET seq = 2 WHERE seq = 3")
        conn.execute("UPDATE entries SET seq = 3 WHERE seq = -1")

    report = ledger.verify()
    assert not report.ok
    assert report.first_bad_seq == 2


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE entries SET body = '{}' WHERE seq = 1",
        "DELETE FROM entries WHERE seq = 1",
        "DELETE FROM entries",
    ],
)
def test_triggers_refuse_update_and_delete(ledger: Ledger, ledger_path: Path, statement: str) -> None:
    _fill(ledger, 2)
    with sqlite3.connect(ledger_path) as conn, pytest.raises(sqlite3.DatabaseError) as caught:
        conn.execute(statement)
    assert "append-only" in str(caught.value)
    assert ledger.verify().ok
    assert ledger.count() == 2


def test_ledger_has_no_update_or_delete_path() -> None:
    for module in (Path(__file__).parents[2] / "recorder").glob("*.py"):
        code = [line for line in module.read_text().splitlines() if "entries" in line]
        assert not [line for line in code if "UPDATE entries" in line or "DELETE FROM entries" in line], module


def test_secrets_are_redacted(ledger: Ledger, ledger_path: Path) -> None:
    entry = ledger.append(
        "intent",
        body={
            "params": {"action": "type", "ref": "e7", "text": "hunter2"},
            "password": "p4ss",
            "API_Token": "abc",
            "nested": {"client_secret": "s3", "ok": 1, "items": [{"auth_token": "t"}]},
            "_secret_keys": ["text"],
        },
    )
    assert entry.body == {
        "params": {"action": "type", "ref": "e7", "text": REDACTED},
        "password": REDACTED,
        "API_Token": REDACTED,
        "nested": {"client_secret": REDACTED, "ok": 1, "items": [{"auth_token": REDACTED}]},
    }
    raw = ledger_path.read_bytes() + (ledger_path.parent / "ledger.sqlite-wal").read_bytes()
    for secret in (b"hunter2", b"p4ss", b"s3", b'"abc"'):
        assert secret not in raw
    assert ledger.verify().ok


def test_idempotency_lookups(ledger: Ledger) -> None:
    assert ledger.find_intent_by_key("s1", "k1") is None
    assert ledger.find_result_by_key("s1", "k1") is None

    intent = ledger.intent("s1", "a1", "k1", "agent", 1, {"action": "click"})
    assert ledger.find_intent_by_key("s1", "k1") == intent
    assert ledger.find_result_by_key("s1", "k1") is None

    first = ledger.result("s1", "a1", "k1", "agent", 1, "unknown", "CONNECTION_LOST", "none", True)
    second = ledger.result(
        "s1", "a1", "k1", "agent", 1, "succeeded", "RECONCILED", "verified", True,
        message="state check", extra={"auto_renew": False},
    )  # fmt: skip
    assert first.seq < second.seq
    found = ledger.find_result_by_key("s1", "k1")
    assert found == second
    assert found is not None
    assert found.body["extra"] == {"auto_renew": False}
    assert ledger.find_result_by_key("s2", "k1") is None
    assert ledger.find_result_by_key("s1", "k2") is None


def test_concurrent_appends_keep_the_chain(ledger: Ledger) -> None:
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(200):
                ledger.append("decision", session_id=f"t{n}", body={"i": i})
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    report = ledger.verify()
    assert report.ok, report.message
    assert report.count == 800
    assert [e.seq for e in ledger.entries()] == list(range(1, 801))


def test_two_connections_to_one_file(ledger: Ledger, ledger_path: Path) -> None:
    with Ledger(ledger_path) as other:
        ledger.append("decision", body={"from": "one"})
        other.append("decision", body={"from": "two"})
        ledger.append("decision", body={"from": "one"})
    assert ledger.verify().count == 3
    assert ledger.verify().ok


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"principal_kind": "robot"}, "principal_kind"),
        ({"epoch": "3"}, "epoch"),
        ({"body": {"x": object()}}, "JSON"),
    ],
)
def test_bad_arguments_are_refused(ledger: Ledger, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(LedgerError, match=match) as caught:
        ledger.append("decision", **kwargs)  # type: ignore[arg-type]
    assert caught.value.reason == "INVALID_ARGUMENT"
    assert ledger.count() == 0


def test_migrations_are_recorded_once(ledger_path: Path) -> None:
    Ledger(ledger_path).close()
    Ledger(ledger_path).close()
    with sqlite3.connect(ledger_path) as conn:
        assert conn.execute("SELECT version, name FROM migrations").fetchall() == [
            (1, "create entries"),
            (2, "index actions by kind"),
        ]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_timeline(ledger: Ledger) -> None:
    ledger.intent(
        "abc", "a1", "k1", "demo-agent", 3,
        {"action": "click", "ref": "e12", "name": "Turn off auto-renew"},
    )  # fmt: skip
    ledger.result(
        "abc", "a1", "k1", "demo-agent", 3, "unknown", "CONNECTION_LOST", "dispatch_returned",
        True, message="no response",
    )  # fmt: skip
    ledger.append("lease_change", principal="alice", principal_kind="human", epoch=4,
                  body={"holder": "alice", "epoch": 4})  # fmt: skip

    lines = timeline(ledger.entries()).splitlines()
    assert len(lines) == 3
    assert lines[0].endswith('  #1 intent   s=abc act=a1 key=k1 agent:demo-agent e=3  click e12 "Turn off auto-renew"')
    assert lines[0][:13].count(":") == 2
    assert lines[0][8] == "."
    assert "#2 result" in lines[1]
    summary = 'unknown CONNECTION_LOST evidence=dispatch_returned started=yes "no response"'
    assert summary in lines[1]
    assert "#3 lease_change human:alice e=4  epoch=4 holder=alice" in lines[2]
