"""The ledger's storage seam: a Ledger over a store that is not SQLite.

``MemoryStore`` keeps one chain in a list (as httpx's ``MockTransport`` stands behind
``BaseTransport``). That the ledger's writers, group commit, recovery, reading and
verification all work over it shows that nothing above ``LedgerStore`` depends on SQLite.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from handrail.recorder import (
    GENESIS_HASH,
    ChainSnapshot,
    Entry,
    EntryQuery,
    IntentBody,
    Ledger,
    LedgerError,
    LedgerStore,
    ReconcileBody,
    ResultBody,
    SessionOpenBody,
)
from handrail.recorder._chain import canonical_json, hash_columns
from handrail.recorder._entry import PreparedEntry, entry_from_row
from handrail.recorder._recovery import RecoveredAction, UnresolvedAction, intent_params
from handrail.recorder._store import BulkRow, RecoveryWrite, StoredRow


class MemoryStore:
    """One hash chain in a list; a lock is the transaction."""

    def __init__(self) -> None:
        self.rows: list[StoredRow] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def location(self) -> str:
        return "memory"

    def _chain(self, entries: Iterable[Sequence[Any]]) -> list[StoredRow]:
        seq, prev = self._head()
        out: list[StoredRow] = []
        for ts, kind, sid, aid, key, who, who_kind, epoch, body in entries:
            seq += 1
            digest = hash_columns(prev, seq, ts, kind, sid, aid, key, who, who_kind, epoch, body)
            out.append((seq, ts, kind, sid, aid, key, who, who_kind, epoch, body, prev, digest))
            prev = digest
        self.rows.extend(out)
        return out

    def _head(self) -> tuple[int, str]:
        return (self.rows[-1][0], self.rows[-1][11]) if self.rows else (0, GENESIS_HASH)

    def append(self, entries: Sequence[PreparedEntry]) -> list[Entry]:
        with self._lock:
            if self._closed:
                raise LedgerError("closed")
            return [entry_from_row(r) for r in self._chain((1, *e) for e in entries)]

    def bulk_load(self, rows: Iterable[BulkRow]) -> tuple[int, str]:
        with self._lock:
            self._chain(rows)
            return self._head()

    def recover(self, result_for: Callable[[RecoveredAction], PreparedEntry]) -> RecoveryWrite:
        with self._lock:
            entries = [entry_from_row(r) for r in self.rows]
            closed = {(e.session_id, e.action_id) for e in entries if e.kind in ("result", "reconcile")}
            found = [
                RecoveredAction(
                    e.session_id,
                    e.action_id,
                    e.idempotency_key,
                    e.principal,
                    e.principal_kind,
                    e.epoch,
                    intent_params(e.body),
                    self._target(entries, e.session_id),
                    e.seq,
                )
                for e in entries
                if e.kind == "intent" and (e.session_id, e.action_id) not in closed
            ]
            stored = self._chain((1, *result_for(a)) for a in found)
            marked = [a.with_result(r[0]) for a, r in zip(found, stored, strict=True)]
            return RecoveryWrite(marked, self._head() if stored else None)

    def unresolved(self) -> list[UnresolvedAction]:
        entries = [entry_from_row(r) for r in self.rows]
        latest: dict[tuple[str, str], Entry] = {}
        for e in entries:
            if e.kind in ("result", "reconcile"):
                latest[(e.session_id, e.action_id)] = e
        out = []
        for (sid, aid), e in latest.items():
            body = e.content
            if isinstance(body, ResultBody) and body.outcome.upper() == "UNKNOWN":
                intent = [i for i in entries if i.kind == "intent" and (i.session_id, i.action_id) == (sid, aid)]
                params = intent_params(intent[-1].body) if intent else {}
                out.append(
                    UnresolvedAction(
                        sid,
                        aid,
                        e.idempotency_key,
                        e.principal,
                        e.principal_kind,
                        e.epoch,
                        params,
                        self._target(entries, sid),
                        e.seq,
                        body.reason,
                    )
                )
        return sorted(out, key=lambda u: u.unknown_seq)

    @staticmethod
    def _target(entries: list[Entry], session_id: str) -> str:
        opened = [e for e in entries if e.session_id == session_id and isinstance(e.content, SessionOpenBody)]
        return opened[0].body_as(SessionOpenBody).target if opened else ""

    def select(self, query: EntryQuery) -> list[Entry]:
        def keep(e: Entry) -> bool:
            for field in ("session_id", "action_id", "kind", "principal", "idempotency_key"):
                wanted = getattr(query, field)
                if wanted is not None and getattr(e, field) != wanted:
                    return False
            if query.outcome is not None:
                said = "REFUSED" if e.kind == "refusal" else str(e.body.get("outcome", "")).upper()
                if said != query.outcome.upper():
                    return False
            return e.seq > query.since_seq and (query.since_ms is None or e.ts_ms >= query.since_ms)

        found = [e for e in map(entry_from_row, self.rows) if keep(e)]
        if query.newest_first:
            found.reverse()
        return found[: query.limit] if query.limit is not None else found

    def head(self) -> tuple[int, str]:
        return self._head()

    def hash_at(self, seq: int) -> str | None:
        return self.rows[seq - 1][11] if 0 < seq <= len(self.rows) else None

    def count(self) -> int:
        return len(self.rows)

    @contextmanager
    def snapshot(self, batch_size: int) -> Iterator[ChainSnapshot]:
        rows = list(self.rows)
        yield ChainSnapshot(self._head(), [rows[i : i + batch_size] for i in range(0, len(rows), batch_size)])

    def close(self) -> None:
        self._closed = True


def test_the_memory_store_is_a_ledger_store() -> None:
    store: LedgerStore = MemoryStore()
    assert store.count() == 0


def test_a_ledger_over_another_store(tmp_path: Path) -> None:
    store = MemoryStore()
    with Ledger(tmp_path / "memory", store=store) as ledger:
        ledger.append(
            "session_open", session_id="s1", principal="a", body=SessionOpenBody("browser:shop", "browser", "")
        )
        ledger.intent("s1", "a1", "k1", "a", 1, {"kind": "click", "ref": "e1"})
        ledger.result("s1", "a1", "k1", "a", 1, "DONE", "ALLOW", "OBSERVED", True)
        ledger.intent("s1", "a2", "k2", "a", 1, {"kind": "click", "ref": "e2"})
        threads = [
            threading.Thread(target=lambda n=n: ledger.append("decision", session_id=f"t{n}", body={"n": n}))
            for n in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        (recovered,) = ledger.recover()
        assert (recovered.action_id, recovered.target, recovered.params) == (
            "a2",
            "browser:shop",
            {"kind": "click", "ref": "e2"},
        )
        (open_,) = ledger.unresolved()
        assert open_.reason == "RECOVERED"
        ledger.reconcile("s1", "a2", "alice", "DID_NOT_HAPPEN", "no order", principal_kind="human")
        assert ledger.unresolved() == []

        intent = ledger.find_intent_by_key("s1", "k1")
        assert intent is not None and intent.body_as(IntentBody).params.ref == "e1"
        assert [e.kind for e in ledger.tail(2)] == ["result", "reconcile"]
        assert ledger.entries(outcome="reconciled")[0].body_as(ReconcileBody).verdict == "DID_NOT_HAPPEN"
        assert ledger.count() == 14 and ledger.verify().ok

    assert canonical_json(store.rows[0][9]) and (tmp_path / "memory.head").is_file()
    store.rows[2] = (*store.rows[2][:9], '{"outcome":"FAILED"}', *store.rows[2][10:])
    with Ledger(tmp_path / "memory", store=store) as ledger:
        report = ledger.verify()
    assert not report.ok and report.first_bad_seq == 3


def test_a_closed_store_refuses_appends(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "memory", store=MemoryStore())
    ledger.close()
    with pytest.raises(LedgerError, match="closed"):
        ledger.append("decision")
