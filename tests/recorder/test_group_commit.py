from __future__ import annotations

import threading
from pathlib import Path

import pytest

from handrail.recorder import Entry, Ledger, LedgerError, NewEntry, canonical_json


def test_threads_share_commits_and_every_returned_entry_is_stored(ledger: Ledger) -> None:
    threads, per_thread = 8, 500
    barrier = threading.Barrier(threads)
    returned: list[list[Entry]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                returned[n].append(ledger.append("intent", session_id=f"t{n}", action_id=f"a{i}", body={"i": i}))
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()

    assert errors == []
    report = ledger.verify()
    assert report.ok, report.message
    assert report.count == threads * per_thread
    stored = {entry.seq: entry for entry in ledger.entries()}
    for n, entries in enumerate(returned):
        assert [e.action_id for e in entries] == [f"a{i}" for i in range(per_thread)]
        assert [e.seq for e in entries] == sorted(e.seq for e in entries)
        for entry in entries:
            assert stored[entry.seq] == entry, n
    assert ledger._commits < threads * per_thread  # some commits carried several threads


def test_append_many_is_one_transaction_with_consecutive_seqs(ledger: Ledger) -> None:
    ledger.append("session_open", session_id="s1", body={"target": "t"})
    commits = ledger._commits
    entries = ledger.append_many(
        [
            NewEntry("intent", "s1", "a1", "k1", "agent-1", "agent", 2, {"params": {"x": 1}}),
            NewEntry("result", "s1", "a1", "k1", "agent-1", body={"outcome": "DONE"}),
            NewEntry("decision", body={"token": "secret-value"}),
        ]
    )
    assert ledger._commits == commits + 1
    assert [e.seq for e in entries] == [2, 3, 4]
    assert entries[1].prev_hash == entries[0].entry_hash
    assert entries[2].body == {"token": "[REDACTED]"}
    assert ledger.entries(since_seq=1) == entries
    assert ledger.append_many([]) == []
    assert ledger.verify().ok


def test_append_many_writes_nothing_when_one_entry_is_bad(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="principal_kind"):
        ledger.append_many([NewEntry("intent"), NewEntry("intent", principal_kind="robot")])  # type: ignore[arg-type]
    assert ledger.count() == 0


def test_append_after_close_is_an_error(ledger_path: Path) -> None:
    ledger = Ledger(ledger_path)
    ledger.close()
    ledger.close()  # twice is fine
    with pytest.raises(LedgerError, match="closed"):
        ledger.append("decision")


def test_bulk_load_builds_a_chain_that_verifies(ledger: Ledger) -> None:
    ledger.append("session_open", session_id="s1", body={"target": "t"})
    rows = [
        (1_700_000_000_000 + i, "intent", "s1", f"a{i}", f"k{i}", "agent-1", "agent", 1,
         canonical_json({"params": {"i": i}}))
        for i in range(1000)
    ]  # fmt: skip
    assert ledger._bulk_load(rows) == 1001
    ledger.append("decision", body={"after": True})
    report = ledger.verify()
    assert report.ok, report.message
    assert report.count == 1002
    assert len(ledger.recover()) == 1000
