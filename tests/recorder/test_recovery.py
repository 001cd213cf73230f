from __future__ import annotations

from pathlib import Path

import pytest

from handrail.recorder import Ledger, LedgerError, timeline


def _open_session(ledger: Ledger, sid: str, target: str) -> None:
    ledger.append("session_open", session_id=sid, principal="agent-1", epoch=3, body={"target": target})


def _done(ledger: Ledger, sid: str, aid: str, outcome: str = "DONE") -> None:
    ledger.result(sid, aid, f"k-{aid}", "agent-1", 3, outcome, "ALLOW", "OBSERVED", True)


def test_intents_without_results_become_unknown_exactly_once(ledger: Ledger) -> None:
    _open_session(ledger, "s1", "browser:shop")
    ledger.intent("s1", "a1", "k-a1", "agent-1", 3, {"action": "click", "ref": "e1"})
    _done(ledger, "s1", "a1")
    ledger.intent("s1", "a2", "k-a2", "agent-1", 3, {"action": "click", "ref": "e2"})
    ledger.intent("s2", "a3", "k-a3", "agent-2", 5, {"action": "type", "password": "x"})
    ledger.intent("s1", "a4", "k-a4", "agent-1", 3, {"action": "submit"})
    ledger.reconcile("s1", "a4", "alice", "DID_NOT_HAPPEN", "no order", principal_kind="human")

    recovered = ledger.recover()

    assert [(r.session_id, r.action_id) for r in recovered] == [("s1", "a2"), ("s2", "a3")]
    first, second = recovered
    assert first.idempotency_key == "k-a2"
    assert first.principal == "agent-1"
    assert first.principal_kind == "agent"
    assert first.epoch == 3
    assert first.params == {"action": "click", "ref": "e2"}
    assert first.target == "browser:shop"
    assert second.target == ""  # no session_open for s2
    assert second.params == {"action": "type", "password": "[REDACTED]"}

    result = ledger.entries(kind="result", action_id="a2")[-1]
    assert result.seq == first.result_seq
    assert result.body["outcome"] == "UNKNOWN"
    assert result.body["reason"] == "RECOVERED"
    assert result.body["execution_started"] is True
    assert "stopped" in result.body["message"]
    assert result.body["extra"] == {"intent_seq": first.intent_seq, "recorded_by": "recovery"}
    assert ledger.find_result_by_key("s1", "k-a2") == result

    count = ledger.count()
    assert ledger.recover() == []
    assert ledger.count() == count
    assert ledger.verify().ok
    # Nothing was retried: there is still exactly one intent per action.
    assert len(ledger.entries(kind="intent", action_id="a2")) == 1


def test_recover_on_an_empty_ledger(ledger: Ledger) -> None:
    assert ledger.recover() == []
    assert ledger.unresolved() == []


def test_recovery_survives_reopen(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        _open_session(ledger, "s1", "browser:t")
        ledger.intent("s1", "a1", "k-a1", "agent-1", 3, {"action": "click"})
    with Ledger(ledger_path) as ledger:
        assert [r.action_id for r in ledger.recover()] == ["a1"]
    with Ledger(ledger_path) as ledger:
        assert ledger.recover() == []
        assert [u.action_id for u in ledger.unresolved()] == ["a1"]


def test_unresolved_until_reconciled(ledger: Ledger) -> None:
    _open_session(ledger, "s1", "browser:shop")
    for aid in ("a1", "a2", "a3", "a4"):
        ledger.intent("s1", aid, f"k-{aid}", "agent-1", 3, {"action": "click", "ref": aid})
    _done(ledger, "s1", "a1")
    _done(ledger, "s1", "a2", "UNKNOWN")  # e.g. the connection was lost after dispatch
    _done(ledger, "s1", "a3", "unknown")  # any case
    ledger.recover()  # a4 becomes UNKNOWN too

    unresolved = ledger.unresolved()
    assert [u.action_id for u in unresolved] == ["a2", "a3", "a4"]
    assert unresolved[0].target == "browser:shop"
    assert unresolved[0].params == {"action": "click", "ref": "a2"}
    assert unresolved[0].reason == "ALLOW"
    assert unresolved[2].reason == "RECOVERED"

    entry = ledger.reconcile("s1", "a2", "agent-1", "HAPPENED", "the order page lists it")
    assert entry.kind == "reconcile"
    assert entry.idempotency_key == "k-a2"
    assert entry.epoch == 3
    assert entry.body == {
        "outcome": "RECONCILED",
        "verdict": "HAPPENED",
        "evidence": "the order page lists it",
    }
    assert ledger.find_reconcile_by_key("s1", "k-a2") == entry
    assert [u.action_id for u in ledger.unresolved()] == ["a3", "a4"]

    # A later known result also ends it (its latest word is no longer UNKNOWN) ...
    _done(ledger, "s1", "a3")
    assert [u.action_id for u in ledger.unresolved()] == ["a4"]
    # ... and a fresh UNKNOWN after a reconcile makes it unresolved again.
    _done(ledger, "s1", "a2", "UNKNOWN")
    assert [u.action_id for u in ledger.unresolved()] == ["a4", "a2"]  # by UNKNOWN seq
    assert "RECONCILED HAPPENED" in timeline([entry])


def test_same_action_id_in_two_sessions_is_two_actions(ledger: Ledger) -> None:
    ledger.intent("s1", "a1", "k", "agent-1", 1, {})
    ledger.intent("s2", "a1", "k", "agent-1", 1, {})
    _done(ledger, "s1", "a1")
    assert [(r.session_id, r.action_id) for r in ledger.recover()] == [("s2", "a1")]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("s1", "a1", "alice", "MAYBE", "?"), "INVALID_ARGUMENT"),
        (("s1", "nope", "alice", "HAPPENED", "?"), "NOT_FOUND"),
    ],
)
def test_bad_reconcile_is_refused(ledger: Ledger, args: tuple[str, ...], reason: str) -> None:
    ledger.intent("s1", "a1", "k", "agent-1", 1, {})
    with pytest.raises(LedgerError) as caught:
        ledger.reconcile(*args)  # type: ignore[arg-type]
    assert caught.value.reason == reason
    assert ledger.count() == 1


def test_lease_change(ledger: Ledger) -> None:
    entry = ledger.lease_change("browser:shop", "takeover", "alice", "human", 4, session_id="s1")
    assert (entry.kind, entry.principal, entry.principal_kind, entry.epoch) == (
        "lease_change", "alice", "human", 4,
    )  # fmt: skip
    assert entry.body == {"target": "browser:shop", "event": "takeover"}
    assert entry.session_id == "s1"
    back = ledger.lease_change("browser:shop", "hand_back", "alice", "human", 4, detail={"to": "a"})
    assert back.body["detail"] == {"to": "a"}
    assert "takeover browser:shop" in timeline([entry])
    with pytest.raises(LedgerError, match="event"):
        ledger.lease_change("browser:shop", "", "alice", "human", 4)
