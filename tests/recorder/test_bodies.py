"""Typed entry bodies: they read what the ledger stores and write exactly what it stored.

The golden hashes below were computed by the ledger as it was before the bodies were
typed (one JSON dict per entry, read back by key): the same calls must give the same
chain, so that a ledger written before still verifies and reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from handrail import Outcome, Verdict
from handrail.recorder import (
    KINDS,
    ActionParams,
    DecisionBody,
    IntentBody,
    LeaseChangeBody,
    LeaseDetail,
    Ledger,
    LedgerError,
    OtherBody,
    ReconcileBody,
    RefusalBody,
    ResultBody,
    ResultExtra,
    SessionCloseBody,
    SessionOpenBody,
    canonical_json,
    parse_body,
)

GOLDEN = [
    ("session_open", "c38d7cc490ea4ca50f6d90e163d3d0a9c1a3eb80389068dea1dedbb438c16a8e"),
    ("intent", "9fd3c4cebf7465662ea108bba15939c38bd2973f267289f444ff8007ba4cb48f"),
    ("result", "7f6005d4738b39d4c323e91feee9142da5737afec6f4f65f9a3cc54ac0524f32"),
    ("intent", "ee211dc061f19cde7e0ca005358ee863e0c497f7af7258c6a81ebe80a20583a9"),
    ("result", "b332bda9bfe4aa637f566775548215cffe74bb6382df9f1444b3d73cb5536722"),
    ("reconcile", "4d698394bb88a9b5c3e98b5012c4975cbc9aacb23932afb33b4025bd8a27d98a"),
    ("reconcile", "f16856320985081a1be1ee2b5434f5009592e0b0fe1855e99d0651c1c6e8c3f7"),
    ("refusal", "cb3701a5b9a346d2e90b96b458b39c3fd958362a455b9705be4c0522039190a2"),
    ("lease_change", "ba0cc0e4cce17e6ed157dfd38632f1d6111540a76a91d8c2be7c080da40cf124"),
    ("lease_change", "d955deac78fb1098ca9f4f04ccf1b4fcee3273231aaf1ceb2868d706baa415f2"),
    ("intent", "2e550dd54650634e1a15497be20484690db2fbccfd168dfb4246eaebc9af6039"),
    ("result", "ea0a32ca19a0b351a0e7e80d777c89a242e8806b449191b7e08aacd7b55bdaed"),
    ("session_close", "755947da4e01359885cb0f4722204a53854e388e9d276280870fb73420018b66"),
    ("decision", "5e3cefaff1474f005810317cc7328ae9ef649071b774b3cbe8f3436ac560eaa2"),
]

PAY = {
    "kind": "click",
    "observation_id": "s1:1",
    "ref": "e12",
    "role": "button",
    "name": "Pay",
    "fingerprint": "f" * 64,
    "decision_id": "d1",
    "password": "x",
    "values": ["a", "b"],
    "x": 0,
    "odd": [1, {"token": "t"}],
}
SESSION_OPEN = {"target": "browser:shop", "backend": "browser", "start_url": "http://shop/"}
REFUSAL = {
    "kind": "click",
    "ref": "e9",
    "role": "button",
    "name": "Delete",
    "url": "",
    "reason": "POLICY_FORBID",
    "message": "forbidden",
    "decision_id": "d3",
    "policies": ["forbid-delete"],
}


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    from handrail.recorder import _sqlite

    monkeypatch.setattr(_sqlite, "now_ms", lambda: 1_700_000_000_000)


def _write(ledger: Ledger, typed: bool) -> None:
    def body(raw: dict[str, Any], model: Any) -> Any:
        return model if typed else raw

    ledger.append("session_open", session_id="s1", principal="agent-1", epoch=3,
                  body=body(SESSION_OPEN, SessionOpenBody("browser:shop", "browser", "http://shop/")))  # fmt: skip
    ledger.intent("s1", "a1", "k1", "agent-1", 3, ActionParams.from_dict(PAY) if typed else PAY)
    ledger.result("s1", "a1", "k1", "agent-1", 3, Outcome.DONE if typed else "DONE", "ALLOW", "OBSERVED", True,
                  "done; the page was re-observed",
                  ResultExtra(decision_id="d1", via="pointer") if typed else {"decision_id": "d1", "via": "pointer"})  # fmt: skip
    ledger.intent("s1", "a2", "k2", "agent-1", 3, {"kind": "type", "observation_id": "s1:2", "text": "héllo", "_secret_keys": ["text"]})  # fmt: skip
    ledger.result("s1", "a2", "k2", "agent-1", 3, "UNKNOWN", "CONNECTION_LOST", "DISPATCH_RETURNED", True)
    ledger.reconcile("s1", "a2", "agent-1", Verdict.HAPPENED if typed else "HAPPENED", "the order page lists it",
                     observation_id="s1:3")  # fmt: skip
    ledger.reconcile("s1", "a2", "alice", "DID_NOT_HAPPEN", "no", principal_kind="human", message="checked")
    ledger.append("refusal", session_id="s1", action_id="a3", idempotency_key="k3", principal="agent-1", epoch=3,
                  body=body(REFUSAL, RefusalBody("click", "e9", "button", "Delete", "", "POLICY_FORBID", "forbidden",
                                                 "d3", ("forbid-delete",))))  # fmt: skip
    ledger.lease_change("browser:shop", "takeover", "alice", "human", 4, session_id="s1")
    ledger.lease_change("browser:shop", "hand_back", "alice", "human", 4,
                        detail=LeaseDetail(holder_kind="human", next_holder="agent-1") if typed
                        else {"holder_kind": "human", "next_holder": "agent-1"})  # fmt: skip
    ledger.intent(
        "s1", "a4", "k4", "agent-1", 4, {"kind": "navigate", "observation_id": "s1:4", "url": "http://shop/x"}
    )
    ledger.recover()
    ledger.append("session_close", session_id="s1", principal="agent-1", body=SessionCloseBody() if typed else None)
    ledger.append("decision", body=body({"decision_id": "d9"}, DecisionBody("d9")))


@pytest.mark.parametrize("typed", [False, True], ids=["dicts", "typed bodies"])
@pytest.mark.usefixtures("fixed_clock")
def test_the_chain_is_the_one_written_before_bodies_were_typed(tmp_path: Path, typed: bool) -> None:
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        _write(ledger, typed)
        entries = ledger.entries()
        assert [(e.kind, e.entry_hash) for e in entries] == GOLDEN
        assert ledger.verify().ok


@pytest.mark.usefixtures("fixed_clock")
def test_every_entry_reads_back_typed(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        _write(ledger, typed=False)
        entries = ledger.entries()
    bodies = [e.content for e in entries]
    assert [type(b) for b in bodies] == [
        SessionOpenBody, IntentBody, ResultBody, IntentBody, ResultBody, ReconcileBody, ReconcileBody,
        RefusalBody, LeaseChangeBody, LeaseChangeBody, IntentBody, ResultBody, SessionCloseBody, DecisionBody,
    ]  # fmt: skip
    pay = entries[1].body_as(IntentBody).params
    assert (pay.kind, pay.role, pay.name, pay.fingerprint, pay.values, pay.x) == (
        "click",
        "button",
        "Pay",
        "f" * 64,
        ("a", "b"),
        0,
    )
    assert pay.other == {"password": "[REDACTED]", "odd": [1, {"token": "[REDACTED]"}]}
    assert pay.text is None and pay.url is None
    done = entries[2].body_as(ResultBody)
    assert done.outcome == Outcome.DONE and done.execution_started and done.extra.via == "pointer"
    assert entries[5].body_as(ReconcileBody) == ReconcileBody("HAPPENED", "the order page lists it", "s1:3")
    assert entries[9].body_as(LeaseChangeBody).detail.next_holder == "agent-1"
    recovered = entries[11].body_as(ResultBody)
    assert recovered.is_outcome(Outcome.UNKNOWN) and recovered.extra.intent_seq == 11
    assert entries[7].body_as(RefusalBody).params == ActionParams(kind="click", ref="e9", role="button", name="Delete")
    with pytest.raises(LedgerError, match="is a result entry, not intent"):
        entries[2].body_as(IntentBody)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"action": "click", "ref": "e12"},
        PAY,
        {"kind": "click", "ref": "e1", "role": "button", "name": ""},
        {"x": True, "y": 1.5, "values": ["a", 2], "keys": ("Control", "a"), "tab_id": None},
    ],
)
def test_action_params_give_back_the_mapping_they_read(params: dict[str, Any]) -> None:
    read = ActionParams.from_dict(params)
    assert read.to_dict() == {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}
    assert canonical_json(IntentBody.body_of(params)) == canonical_json(IntentBody(read).to_body())
    assert IntentBody.from_body(IntentBody(read).to_body()) == IntentBody(read)


@pytest.mark.parametrize(
    "body",
    [
        SessionOpenBody("browser:shop", "browser", "http://shop/"),
        SessionCloseBody(),
        IntentBody(ActionParams(kind="fill", ref="e3", role="textbox", name="City", text="Paris")),
        ResultBody("DONE", "ALLOW", "VERIFIED", True, "done", ResultExtra(decision_id="d", typed_chars=3)),
        ResultBody("REFUSED", "STALE_REF", "NONE", False),
        RefusalBody("click", "e9", "button", "Delete", "", "POLICY_FORBID", "no", "d3", ("p",)),
        DecisionBody("d1"),
        ReconcileBody("DID_NOT_HAPPEN", "no order", "s:4", "looked"),
        LeaseChangeBody("browser:shop", "hand_back", LeaseDetail(next_holder="a", other={"why": "lunch"})),
    ],
)
def test_a_body_reads_back_what_it_wrote(body: Any) -> None:
    assert parse_body(body.KIND, body.to_body()) == body


def test_reading_is_lenient_and_unknown_kinds_stay_as_stored() -> None:
    assert parse_body("result", {"outcome": "DONE"}) == ResultBody(outcome="DONE")
    assert parse_body("intent", {"params": "not a mapping"}) == IntentBody()
    assert parse_body("lease_change", {"holder": "alice", "epoch": 4}) == LeaseChangeBody()
    assert parse_body("audit", {"a": 1}) == OtherBody("audit", {"a": 1})
    assert KINDS == (
        "session_open", "session_close", "intent", "result", "reconcile", "refusal", "decision", "lease_change",
        "navigation", "request",
    )  # fmt: skip


def test_a_body_of_another_kind_is_refused(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.sqlite") as ledger, pytest.raises(LedgerError, match="not of a result entry"):
        ledger.append("result", body=DecisionBody("d1"))
