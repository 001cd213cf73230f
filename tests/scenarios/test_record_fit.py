"""``handrail record`` refuses a session its fixture does not serve, warns about what a
replay could not bring about, and reads a takeover that refused the session from the
target's lease changes (written once per target, under no session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handrail.recorder import Ledger, RefusalBody, SessionOpenBody
from handrail.recorder._bodies import ActionParams
from handrail.scenarios import RecordError, record_session
from handrail.scenarios._cli import run_record


def _ledger(path: Path, start_url: str, *, takeover: bool) -> None:
    with Ledger(path) as ledger:
        ledger.append(
            "session_open", session_id="s_1", principal="agent-1",
            body=SessionOpenBody("browser:t", "browser", start_url),
        )  # fmt: skip
        params = ActionParams.from_dict({"kind": "click", "ref": "e3", "role": "button", "name": "Pause plan"})
        ledger.intent("s_1", "a_1", "k1", "agent-1", 1, params)
        ledger.result("s_1", "a_1", "k1", "agent-1", 1, "DONE", "ALLOW", "OBSERVED", True, "done")
        if takeover:  # another session's executor wrote it: once, under no session
            ledger.lease_change("browser:t", "takeover", "ops", "human", 2)
        ledger.append(
            "refusal", session_id="s_1", action_id="a_2", idempotency_key="k2", principal="agent-1", epoch=1,
            body=RefusalBody(kind="click", ref="e4", role="button", name="Delete account", reason="HELD_BY_HUMAN"),
        )  # fmt: skip


def test_a_session_its_fixture_does_not_serve_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ledger.sqlite"
    _ledger(db, "http://127.0.0.1:9/not-the-subscription-page", takeover=True)
    with pytest.raises(RecordError, match="does not fit the subscription fixture"):
        record_session(db, "s_1", fixture="subscription")
    with pytest.raises(RecordError, match="unknown fixture"):
        record_session(db, "s_1", fixture="nope")


def test_a_takeover_written_under_no_session_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    _ledger(db, "http://127.0.0.1:9/", takeover=True)
    warnings: list[str] = []
    text = record_session(db, "s_1", fixture="subscription", warn=warnings.append)
    assert "fault: takeover" in text
    assert not [w for w in warnings if "HELD_BY_HUMAN" in w]


def test_what_a_replay_cannot_bring_about_is_warned_about(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ledger.sqlite"
    _ledger(db, "http://127.0.0.1:9/", takeover=False)
    out = tmp_path / "s.yaml"

    class Args:
        session, output, data_dir, fixture, name, state_url = "s_1", out, None, "subscription", None, None

    Args.db = str(db)  # type: ignore[attr-defined]
    assert run_record(Args()) == 0  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "warning: a HELD_BY_HUMAN refusal of click came with no lease change" in err
    assert "NOTE: a HELD_BY_HUMAN refusal" in out.read_text()
