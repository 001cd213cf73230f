"""The memory-mapped decision journal: what a kill leaves behind is read back exactly, and
the line logged for a decision is the JSON of its parts, whether it was journaled by this
version (framed fields) or an earlier one (JSON lines)."""

from __future__ import annotations

import dataclasses
import enum
import json
import marshal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handrail import Reason
from handrail.authz import Authorizer, ElementContext, _journal
from handrail.authz._core import CheckInput, Decision, DecisionRecord, LeaseInfo, validate_check
from handrail.authz._errors import InvalidArgumentError
from handrail.authz._journal import Journal, frame, journal_paths, read_frames, read_lines
from handrail.authz._models import HolderKind
from handrail.authz._policies import DEFAULT_POLICIES_DIR, PolicyEngine
from handrail.authz._sqlite import Store
from handrail.authz._sqlite_schema import decision_fields, decision_parts, decision_record, decision_row, fields_row


def test_appended_entries_are_in_the_file_at_once(tmp_path: Path) -> None:
    journal = Journal.create(tmp_path / "a.sqlite", 4096, prefault=4096)
    assert journal.append(frame(b"one")) and journal.append(frame(b"\0two\n"))
    # another process (a restart after kill -9) reads the file, not the mapping
    assert read_frames(journal.path) == [b"one", b"\0two\n"]
    assert read_frames(journal.path, len(frame(b"one"))) == [b"\0two\n"]  # past what was flushed
    assert journal_paths(tmp_path / "a.sqlite") == [journal.path]
    journal.discard()
    assert journal_paths(tmp_path / "a.sqlite") == []


def test_a_line_that_does_not_fit_is_not_copied(tmp_path: Path) -> None:
    journal = Journal.create(tmp_path / "a.sqlite", 16)
    assert journal.append(b"0123456789\n")
    assert not journal.append(b"0123456789\n")
    assert journal.end == 11
    journal.discard()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.binary(min_size=1, max_size=64), copied=st.data())
def test_an_entry_cut_short_by_a_kill_is_dropped(tmp_path: Path, payload: bytes, copied: st.DataObject) -> None:
    """A kill during the copy of the last entry leaves any subset of its bytes written (a
    copy may go in any order); the entries before it are read, it is not (unless the bytes
    left out were zeros anyway: then it is whole)."""
    whole = frame(b"before")
    entry = frame(payload)
    written = copied.draw(st.sets(st.integers(0, len(entry) - 1), max_size=len(entry) - 1))
    cut = bytes(b if i in written else 0 for i, b in enumerate(entry))
    path = tmp_path / f"a.sqlite.1{_journal.SUFFIX}"  # rewritten by every example
    path.write_bytes(whole + cut + b"\0" * 64)
    assert read_frames(path) == [b"before"] + ([payload] if cut == entry else [])


def test_lines_cut_short_by_a_kill_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / f"a.sqlite.1{_journal.SUFFIX}"
    # a whole line; one whose newline was copied before its middle; one cut before its end
    path.write_bytes(b'["ok"]\n["to' + b"\0" * 4 + b'"]\n["cut' + b"\0" * 100)
    assert read_lines(path) == [b'["ok"]']


def _record(store: Store, i: int) -> DecisionRecord:
    decision_id = store.new_decision_id()
    request = CheckInput("agent-a", "t", 1, "submit", element_name=f"b{i}")
    return DecisionRecord(decision_id, i, "exe", request, Decision(True, "ALLOW", "ok", decision_id))


def test_full_journals_are_replaced_and_deleted_once_flushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("handrail.authz._journal.JOURNAL_BYTES", 512)
    store = Store.in_dir(tmp_path, journal=True)
    records = [_record(store, i) for i in range(10)]
    for record in records:
        store.record_decision(record)
    db = tmp_path / "authz.sqlite"
    assert len(journal_paths(db)) > 1  # an entry is about 200 bytes: the journal filled up
    assert sum(len(read_frames(p)) for p in journal_paths(db)) == 10
    assert store.flush_decisions() == 10
    assert len(journal_paths(db)) == 1  # the one in use stays
    store.close()
    assert journal_paths(db) == []


def test_journals_left_by_a_kill_are_replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("handrail.authz._journal.JOURNAL_BYTES", 512)
    store = Store.in_dir(tmp_path, journal=True)
    records = [_record(store, i) for i in range(6)]
    for record in records[:3]:
        store.record_decision(record)
    store.flush_decisions()  # some are in SQLite already: replaying them again is harmless
    for record in records[3:]:
        store.record_decision(record)
    # a kill: the store is never closed
    with Store.in_dir(tmp_path, journal=True) as again:
        assert again.count_decisions() == 6
        assert [again.get_decision(r.decision_id).request.element_name for r in records] == [f"b{i}" for i in range(6)]
    assert journal_paths(tmp_path / "authz.sqlite") == []


def test_a_journal_of_json_lines_left_by_an_earlier_version_is_replayed(tmp_path: Path) -> None:
    """Before entries were framed, a journal held each decision's JSON line; a sidecar
    killed then and started on this version replays those lines."""
    store = Store.in_dir(tmp_path, journal=True)
    records = [_record(store, i) for i in range(3)]
    store.close()
    old = tmp_path / f"authz.sqlite.1-1-0{_journal.SUFFIX}"
    lines = b"".join(decision_row(r)[-1].encode() + b"\n" for r in records)
    old.write_bytes(lines + b'["cut' + b"\0" * 100)
    with Store.in_dir(tmp_path, journal=True) as again:
        assert again.count_decisions() == 3
        assert [again.get_decision(r.decision_id) for r in records] == records
    assert not old.exists()


def test_a_decision_holding_enum_members_is_journaled_as_their_values(tmp_path: Path) -> None:
    """marshal writes only plain values; a reason, a verb or a holder kind given as an enum
    member (a ``str`` subclass) is journaled, flushed and replayed as its value."""

    class Verb(enum.StrEnum):
        SUBMIT = "submit"

    store = Store.in_dir(tmp_path, journal=True)
    decision_id = store.new_decision_id()
    request = CheckInput("agent-a", "t", 1, Verb.SUBMIT, element_name="b")
    lease = LeaseInfo("t", HolderKind.AGENT, "agent-a", 1, 10_000)
    record = DecisionRecord(
        decision_id, 5, "exe", request, Decision(True, Reason.ALLOW, "ok", decision_id, lease_epoch=1), lease
    )
    store.record_decision(record)
    expected = decision_row(record)
    # a kill: the store is never closed; the journal is replayed
    with Store.in_dir(tmp_path, journal=True) as again:
        got = again.get_decision(decision_id)
        assert (got.decision.reason, got.request.verb, got.lease) == ("ALLOW", "submit", lease)
        assert type(got.decision.reason) is str and type(got.lease.holder_kind) is str
        stored = again._decisions._conn.execute("SELECT record FROM decision_log").fetchall()
    assert stored == [(expected[-1],)]  # the very text the record's plain values make


def _fields_frame(**changes: tuple[int, Any]) -> bytes:
    """The journal entry of a decision's fields, some replaced (``name=(position, value)``)."""
    request = CheckInput("agent-a", "t", 1, "submit", element_name="b")
    fields = list(decision_fields(DecisionRecord("0" * 32, 1, "exe", request, Decision(True, "ALLOW", "ok", "0" * 32))))
    for position, value in changes.values():
        fields[position] = value
    return frame(marshal.dumps(tuple(fields)))


@pytest.mark.parametrize(
    "entry",
    [
        frame(b"\xffnot marshal"),
        frame(b"\xe9\x01\x00\x00\x00"),  # marshal of an int, not of fields
        _fields_frame(lease=(25, ("t",))),  # a lease of one field
        _fields_frame(password=(12, "yes")),  # a flag that is not a boolean
        b'["not json\n',
        b"[1]\n",  # JSON, not a decision's parts
        b'[1, "id", 2, "agent-a", "t", "ALLOW"]\n',  # six parts, no body
        b'["1", "id", 2, "agent-a", "t", "ALLOW", {}]\n',  # a sequence number that is text
        b'[1, "id", 2, "agent-a", "t", "ALLOW", []]\n',  # a body that is not an object
        b"hello",  # neither an entry nor a JSON line
    ],
    ids=[
        "not-marshal",
        "an-int",
        "short-lease",
        "flag-not-bool",
        "not-json",
        "line-of-one",
        "line-of-six",
        "line-seq-text",
        "line-body-list",
        "foreign",
    ],
)
def test_a_journal_entry_that_does_not_decode_is_named_in_one_line(tmp_path: Path, entry: bytes) -> None:
    """A whole entry (its CRC holds) that is not a decision's fields was not written by a
    sidecar: the store refuses to start, naming the file, and leaves it in place."""
    Store.in_dir(tmp_path, journal=True).close()
    bad = tmp_path / f"authz.sqlite.1-1-0{_journal.SUFFIX}"
    bad.write_bytes(entry + b"\0" * 64)
    with pytest.raises(RuntimeError, match=f"{bad.name}: a decision journal entry does not decode"):
        Store.in_dir(tmp_path, journal=True)
    assert bad.exists()


def test_a_first_entry_whose_marker_a_kill_left_uncopied_replays_nothing(tmp_path: Path) -> None:
    """``memcpy`` stores an entry's first 32 bytes last: a kill during the first entry of
    a journal leaves its marker zero and the rest copied. Nothing in that file was
    acknowledged, whatever the rest holds: here page text with newlines and a forged JSON
    line, which must not be taken for a journal of JSON lines (the store would refuse to
    start, or log the forged ALLOW)."""
    forged = '[77, "forged", 1, "agent-a", "t", "ALLOW", {"caller": "x"}]'
    request = CheckInput("agent-a", "t", 1, "submit", element_name=f"Close account\n{forged}\nContinue")
    store = Store.in_dir(tmp_path, journal=True)
    decision_id = store.new_decision_id()
    store.close()
    record = DecisionRecord(decision_id, 1, "exe", request, Decision(True, "ALLOW", "ok", decision_id))
    entry = frame(marshal.dumps(decision_fields(record)))
    cut = tmp_path / f"authz.sqlite.1-1-0{_journal.SUFFIX}"
    cut.write_bytes(b"\0" * 32 + entry[32:] + b"\0" * 4096)
    assert read_lines(cut)  # read as JSON lines, it would hold some
    with Store.in_dir(tmp_path, journal=True) as again:
        assert again.count_decisions() == 0
    assert not cut.exists()


def test_a_damaged_journal_is_an_error_not_a_silent_loss(tmp_path: Path) -> None:
    """A whole entry after one that fails its CRC is not what a kill leaves (it cuts only
    the last): the store refuses to start, naming the file, and keeps it."""
    store = Store.in_dir(tmp_path, journal=True)
    entries = [frame(marshal.dumps(decision_fields(_record(store, i)))) for i in range(3)]
    store.close()
    damaged = bytearray(b"".join(entries))
    damaged[len(entries[0]) + 20] ^= 0x01  # one bit of the second entry's payload
    bad = tmp_path / f"authz.sqlite.1-1-0{_journal.SUFFIX}"
    bad.write_bytes(bytes(damaged) + b"\0" * 64)
    with pytest.raises(RuntimeError, match=f"{bad.name}: .*fails its CRC and a whole one follows it"):
        Store.in_dir(tmp_path, journal=True)
    assert bad.exists()


@pytest.mark.parametrize(
    ("epoch", "says"),
    [
        (-1, "must not be negative"),
        (2**63, "must be at most"),
        pytest.param(10**5000, "must be at most", id="10**5000"),
        (1.5, "float"),
        (True, "bool"),
    ],
)
def test_a_check_whose_epoch_the_log_could_not_write_is_refused(epoch: object, says: str) -> None:
    """Only an integer of the wire's int64 is an epoch: a bool would be logged as ``1``
    where its JSON says ``true``, and a float or an integer past Python's digit limit could
    be journaled but never written as the log's JSON."""
    request = CheckInput("agent-a", "t", epoch, "submit")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=f"^lease_epoch: .*{says}"):
        validate_check(request)


SURROGATE = "holds a lone surrogate"


@pytest.mark.parametrize(
    ("field", "changes", "says"),
    [
        ("principal", {"principal": "agent-\ud800"}, SURROGATE),
        ("target", {"target": "t\udfff"}, SURROGATE),
        ("resource.element_name", {"element_name": "Save \ud83d"}, SURROGATE),
        ("resource.url", {"url": "https://app.test/\udc80"}, SURROGATE),
        ("resource.visible_text", {"context": ElementContext(visible_text="\ud83d\ude00")}, SURROGATE),  # a pair
        ("approval_asked", {"approval_asked": "\ud800 please"}, SURROGATE),
        ("resource.password_field", {"password_field": "yes"}, "must be a bool, not str"),
        ("resource.document_load", {"document_load": 2}, "must be a bool, not int"),
        ("resource.element_name", {"element_name": ["Save"]}, "must be text, not list"),
        ("resource.window_title", {"window_title": None}, "must be text, not NoneType"),
        ("principal", {"principal": 7}, "must be text, not int"),
        ("resource.url", {"url": b"https://app.test/"}, "must be text, not bytes"),
        ("context", {"context": None}, "must be an ElementContext, not NoneType"),
        ("resource.window_class", {"window_class": "x\0"}, "must not contain NUL"),
    ],
)
def test_a_check_the_log_could_not_write_is_refused_before_it_is_logged(
    tmp_path: Path, field: str, changes: dict[str, Any], says: str
) -> None:
    """What a Python caller can pass and the wire cannot (a surrogate: protobuf strings are
    UTF-8; a flag or a text field of another type) is refused at the door, naming the
    field. Neither database can store a surrogate, and the log writes a flag only as JSON
    true or false: a check's decision is acknowledged before its row is written, so such
    a decision let in would fail every later flush (and the replay at the next start)."""
    store = Store.in_dir(tmp_path, journal=True)
    token = store.add_principal("exe", "executor")
    store.add_principal("agent-a", "agent")
    authz = Authorizer(store, PolicyEngine.load(DEFAULT_POLICIES_DIR))
    caller = authz.authenticate(token)
    request = dataclasses.replace(CheckInput("agent-a", "t", 1, "submit"), **changes)
    with pytest.raises(InvalidArgumentError, match=f"^{field}: {says}"):
        authz.check(caller, request)
    with pytest.raises(InvalidArgumentError, match=f"^{field}: {says}"):
        authz.check_as(token, request)
    denied = authz.check(caller, CheckInput("agent-a", "t\u00e9", 1, "submit", element_name="Sp\u00e4ter"))
    assert not denied.allow  # no lease: refused, and logged with its non-ASCII text
    assert store.flush_decisions() == 1
    assert store.get_decision(denied.decision_id).request.target == "t\u00e9"
    store.close()


def test_the_checkpointer_makes_the_next_journal_ahead(tmp_path: Path) -> None:
    store = Store.in_dir(tmp_path, journal=True)
    journal = store._decisions.journal
    assert journal is not None
    store.start_checkpointer(flush_s=0.005)
    try:
        store.record_decision(_record(store, 0))
        for _ in range(200):
            if journal.has_spare and store.count_decisions() == 1:
                break
            time.sleep(0.01)
        assert journal.has_spare
    finally:
        store.close()
    assert journal_paths(tmp_path / "authz.sqlite") == []


def _failing_once(store: Store) -> list[int]:
    """Make the decision log's next write transaction fail as a full disk would; how many
    failed so far (a list, to read after)."""
    db = store._decisions._db
    real = db.atomic
    failed = [0]

    def atomic(conn: sqlite3.Connection | None = None) -> Any:
        if not failed[0]:
            failed[0] += 1
            raise sqlite3.OperationalError("database or disk is full")
        return real(conn)

    db.atomic = atomic  # type: ignore[method-assign]
    return failed


def test_a_flush_that_fails_keeps_its_decisions_for_the_next(tmp_path: Path) -> None:
    """The decisions a failed flush took are flushed by the next one, and a kill between
    the two loses none of them either (the journal is not marked flushed past them)."""
    store = Store.in_dir(tmp_path, journal=True)
    records = [_record(store, i) for i in range(4)]
    for record in records[:3]:
        store.record_decision(record)
    failed = _failing_once(store)
    with pytest.raises(sqlite3.OperationalError):
        store.flush_decisions()
    assert failed == [1]
    store.record_decision(records[3])
    assert store.flush_decisions() == 4
    assert store.count_decisions() == 4
    store.close()

    killed = Store.in_dir(tmp_path / "killed", journal=True)
    for record in records[:3]:
        killed.record_decision(dataclasses.replace(record, decision_id=killed.new_decision_id()))
    _failing_once(killed)
    with pytest.raises(sqlite3.OperationalError):
        killed.flush_decisions()
    # a kill: the store is never closed
    with Store.in_dir(tmp_path / "killed", journal=True) as again:
        assert again.count_decisions() == 3


def _checkpointer_flushes_one(store: Store, tmp_path: Path) -> None:
    """Start the checkpointer, log one decision, and wait until the file itself holds it
    (read from outside: count_decisions would flush); then close the store."""
    store.start_checkpointer(flush_s=0.005)
    try:
        record = _record(store, 0)
        store.record_decision(record)
        outside = sqlite3.connect(tmp_path / "authz.sqlite")
        try:
            for _ in range(300):
                if outside.execute("SELECT count(*) FROM decision_log").fetchone()[0] == 1:
                    break
                time.sleep(0.01)
            assert outside.execute("SELECT decision_id FROM decision_log").fetchall() == [(record.decision_id,)]
        finally:
            outside.close()
    finally:
        store.close()


def test_the_checkpointer_survives_a_failed_flush(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A flush that fails (a full disk) is said in the log and tried again; the thread goes
    on moving decisions into the file."""
    store = Store.in_dir(tmp_path, journal=True)
    _failing_once(store)
    _checkpointer_flushes_one(store, tmp_path)
    assert "flushing the decision journal failed (1 times): database or disk is full" in caplog.text
    assert "flushes again after 1 failures" in caplog.text


texts = st.text(max_size=20)  # any code point: quotes, controls, non-ASCII
ids = st.lists(st.text(max_size=8), max_size=3).map(tuple)
leases = st.none() | st.builds(LeaseInfo, texts, texts, texts, st.integers(0, 2**62), st.integers(0, 2**62), texts)
records = st.builds(
    DecisionRecord,
    st.sampled_from(["", "decision-1", "00000000000a" + "0" * 20]),
    st.integers(0, 2**62),
    texts,
    st.builds(CheckInput, texts, texts, st.integers(0, 2**62), texts, texts, texts, texts, texts, texts, st.booleans()),
    st.builds(
        Decision, st.booleans(), texts, texts, texts, ids, texts, st.integers(0, 2**62), texts, ids, st.booleans()
    ),
    leases,
    ids,
)


@settings(max_examples=300, deadline=None)
@given(record=records)
def test_the_logged_line_is_the_json_of_the_decision_parts(record: DecisionRecord) -> None:
    row = decision_row(record)
    parts = decision_parts(record)
    assert row[-1] == json.dumps(parts)
    assert row[:-1] == parts[:6]
    assert decision_record(row[1:]).request == record.request
    # what the journal holds of it (its fields, marshalled) makes the same row
    assert fields_row(marshal.loads(marshal.dumps(decision_fields(record)))) == row


def test_the_checkpointer_survives_an_error_that_is_not_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A flush that fails for any reason (here a row that will not render, once) is said
    and tried again: the thread does not die and leave decisions in memory for good."""
    from handrail.authz import _sqlite_decisions

    real, calls = _sqlite_decisions.fields_row, [0]

    def fails_once(fields: Any) -> tuple[Any, ...]:
        calls[0] += 1
        if calls[0] == 1:
            raise ValueError("a row that will not render")
        return real(fields)

    monkeypatch.setattr(_sqlite_decisions, "fields_row", fails_once)
    store = Store.in_dir(tmp_path, journal=True)
    _checkpointer_flushes_one(store, tmp_path)
    assert "flushing the decision journal failed (1 times): a row that will not render" in caplog.text


def test_the_checkpointers_flush_pauses_while_it_writes_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writing a batch's JSON holds the GIL; the checkpointer's flush lets a waiting check
    in every few rows (a reader's flush does not wait), and stores the same rows."""
    from handrail.authz import _sqlite_decisions

    pauses: list[float] = []
    monkeypatch.setattr(_sqlite_decisions.time, "sleep", pauses.append)
    store = Store.in_dir(tmp_path, journal=True)
    records = [_record(store, i) for i in range(10)]
    for record in records[:5]:
        store.record_decision(record)
    assert store._decisions.flush() == 5 and pauses == []
    for record in records[5:]:
        store.record_decision(record)
    assert store._decisions.flush(yielding=True) == 5
    assert pauses == [_sqlite_decisions.RENDER_PAUSE_S] * ((5 - 1) // _sqlite_decisions.RENDER_CHUNK)
    assert [store.get_decision(r.decision_id) for r in records] == records
    store.close()
