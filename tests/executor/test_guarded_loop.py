"""The guarded loop against a real executor process, real Chromium and a real sidecar."""

from __future__ import annotations

import pytest

from handrail.executor import BrowserSession, Outcome
from handrail.recorder import Ledger
from handrail.scenarios import SubscriptionApp
from tests.conftest import AgentSetup, Stack

pytestmark = pytest.mark.browser


def _open(stack: Stack, agent: AgentSetup, app: SubscriptionApp, verbs: list[str]) -> BrowserSession:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, [*verbs, "navigate"], [app.url])  # the start page too
    session = agent.client.open_session(target=agent.target, start_url=app.url + "/")
    session.observe()
    return session


def _posts(app: SubscriptionApp) -> int:
    return sum(n for k, n in app.state()["requests"].items() if k.startswith("POST /") and "__" not in k)


def test_allowed_click_runs_and_is_verified(stack: Stack, agent: AgentSetup, app: SubscriptionApp) -> None:
    session = _open(stack, agent, app, ["submit"])
    r = session.click(session.find("button", "Turn off auto-renew"), expect_text="No thanks, turn off renewal")
    assert r.result.outcome is Outcome.DONE
    assert r.result.evidence.value == "VERIFIED"
    assert r.result.execution_started
    assert r.observation is not None and "No thanks, turn off renewal" in r.observation.snapshot
    r = session.click(session.find("button", "No thanks, turn off renewal"), expect_text="Auto-renew is off")
    assert r.result.outcome is Outcome.DONE, r.result.message
    assert app.state()["auto_renew"] is False
    assert app.state()["requests"]["POST /cancel-renewal"] == 1


def test_expectation_that_fails_is_not_reported_verified(stack: Stack, agent: AgentSetup, app: SubscriptionApp) -> None:
    session = _open(stack, agent, app, ["submit"])
    r = session.click(session.find("button", "Turn off auto-renew"), expect_text="Thank you for staying")
    assert r.result.outcome is Outcome.DONE
    assert r.result.evidence.value == "OBSERVED"
    assert "did not hold" in r.result.message


def test_stale_ref_after_rerender_is_refused_and_nothing_dispatched(
    stack: Stack, agent: AgentSetup, app: SubscriptionApp
) -> None:
    session = _open(stack, agent, app, ["submit"])
    obs = session.latest
    assert obs is not None
    ref = session.find("button", "Pause plan")
    app.push_rerender()
    assert app.wait_rerendered(1, timeout=10)
    r = session.click(ref, observation=obs)
    assert r.result.outcome is Outcome.REFUSED
    assert r.result.reason == "STALE_REF"
    assert not r.result.execution_started
    assert r.observation is None
    assert _posts(app) == 0
    # Observing again gives a ref that works.
    session.observe()
    r = session.click(session.find("button", "Pause plan"))
    assert r.result.outcome is Outcome.DONE
    assert app.state()["paused"] is True


def test_an_older_observation_is_stale(stack: Stack, agent: AgentSetup, app: SubscriptionApp) -> None:
    session = _open(stack, agent, app, ["submit"])
    old = session.latest
    assert old is not None
    ref = session.find("button", "Pause plan", old)
    session.observe()
    r = session.click(ref, observation=old)
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "STALE_OBSERVATION")
    assert _posts(app) == 0


def test_out_of_scope_and_policy_forbid(stack: Stack, agent: AgentSetup, app: SubscriptionApp) -> None:
    session = _open(stack, agent, app, ["submit"])
    r = session.navigate("http://127.0.0.1:9/x")
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "OUT_OF_SCOPE")
    assert r.result.decision_id
    r = session.click(session.find("button", "Delete account"))
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "POLICY_FORBID")
    assert app.state()["account_deleted"] is False
    assert _posts(app) == 0


def test_takeover_bumps_epoch_and_refuses_the_next_write(stack: Stack, agent: AgentSetup, app: SubscriptionApp) -> None:
    session = _open(stack, agent, app, ["submit"])
    before = session.latest
    assert before is not None
    with stack.operator_client() as ops:
        lease = ops.take_over(agent.target)
        assert lease.epoch > before.lease_epoch
        assert lease.holder_kind == "human"
        r = session.click(session.find("button", "Pause plan"))
        assert r.result.outcome is Outcome.REFUSED
        assert r.result.reason in ("HELD_BY_HUMAN", "STALE_EPOCH")
        # Observing during the takeover does not give the agent the lease back.
        obs = session.observe()
        r = session.click(session.find("button", "Pause plan"))
        assert r.result.outcome is Outcome.REFUSED
        assert _posts(app) == 0
        lease = ops.hand_back(agent.target, lease.epoch, next_holder=agent.principal.name)
    obs = session.observe()
    assert obs.lease_epoch > lease.epoch - 1
    r = session.click(session.find("button", "Pause plan"))
    assert r.result.outcome is Outcome.DONE, r.result.message
    assert _posts(app) == 1


def test_idempotency_same_key_returns_recorded_outcome(stack: Stack, agent: AgentSetup, app: SubscriptionApp) -> None:
    session = _open(stack, agent, app, ["submit"])
    cited = session.latest
    ref = session.find("button", "Pause plan")
    first = session.click(ref, idempotency_key="pause-1")
    assert first.result.outcome is Outcome.DONE
    session.observe()
    # The agent lost the reply and sends the very same request again.
    again = session.click(ref, idempotency_key="pause-1", observation=cited)
    assert again.result.outcome is Outcome.DONE
    assert again.result.action_id == first.result.action_id
    assert "nothing dispatched" in again.result.message
    assert app.state()["requests"]["POST /pause"] == 1
    other = session.click(session.find("button", "Delete account"), idempotency_key="pause-1")
    assert (other.result.outcome, other.result.reason) == (Outcome.REFUSED, "IDEMPOTENCY_CONFLICT")
    assert app.state()["requests"]["POST /pause"] == 1


def test_fill_and_ledger_records_intent_before_result(stack: Stack, agent: AgentSetup, app: SubscriptionApp) -> None:
    session = _open(stack, agent, app, ["submit", "input"])
    r = session.click(session.find("button", "Pause plan"))
    assert r.result.outcome is Outcome.DONE
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        entries = ledger.entries(session_id=session.session_id)
        kinds = [e.kind for e in entries if e.action_id == r.result.action_id]
        assert kinds == ["intent", "result"]
        assert ledger.verify().ok


def test_observe_screenshot(stack: Stack, agent: AgentSetup, app: SubscriptionApp) -> None:
    session = _open(stack, agent, app, ["submit"])
    obs = session.observe(screenshot=True)
    assert obs.screenshot_png.startswith(b"\x89PNG\r\n\x1a\n")
    assert obs.observation_id == f"{session.session_id}:{obs.generation}"
    assert len(obs.digest) == 64
    assert obs.title and obs.url.startswith(app.url)
