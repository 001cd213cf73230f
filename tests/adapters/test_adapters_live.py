"""The adapters against the plans fixture app through a real stack: the guard holds for a
vendor's pixel actions, and a safety check is never acknowledged without an operator."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from handrail.adapters import AnthropicComputer, GuardedComputer, OpenAIComputer
from handrail.scenarios import PlansApp
from tests.conftest import AgentSetup, Stack

pytestmark = pytest.mark.browser

PLAN_E_CANCEL = (371, 314)  # CSS pixels of the 1280 x 800 viewport


@pytest.fixture
def plans() -> Iterator[PlansApp]:
    with PlansApp() as app:
        yield app


def _computer(stack: Stack, agent: AgentSetup, app: PlansApp, path: str, **kw: int) -> GuardedComputer:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["input", "submit", "navigate"], [app.url])
    return GuardedComputer(agent.client.open_session(target=agent.target, start_url=app.url + path), **kw)


def test_a_claude_click_on_a_row_repainted_under_the_pointer_is_an_error_not_a_wrong_cancel(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    claude = AnthropicComputer(_computer(stack, agent, plans, "/?rerender=pointermove"), scale=0.8)
    claude.run({"type": "tool_use", "id": "t0", "input": {"action": "screenshot"}})
    x, y = (round(v * 0.8) for v in PLAN_E_CANCEL)
    result = claude.run({"type": "tool_use", "id": "t1", "input": {"action": "left_click", "coordinate": [x, y]}})
    text = result["content"][0]["text"]
    assert result.get("is_error") and "STALE_REF" in text and "Next: look at the new screenshot" in text, text
    time.sleep(0.3)
    assert plans.cancelled() == []


def test_a_safety_check_an_operator_denies_is_not_acknowledged_and_nothing_is_clicked(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    openai = OpenAIComputer(_computer(stack, agent, plans, "/", approval_wait_ms=20_000))
    openai.run({"type": "computer_call", "call_id": "c0", "actions": [{"type": "screenshot"}]})
    denied: list[str] = []

    def deny() -> None:
        with stack.operator_client() as ops:
            deadline = time.monotonic() + 20
            while not denied and time.monotonic() < deadline:
                for a in ops.list_approvals(status="pending", principal=agent.principal.name):
                    ops.deny(a.approval_id, note="not today")
                    denied.append(a.approval_id)
                time.sleep(0.05)

    operator = threading.Thread(target=deny, daemon=True)
    operator.start()
    check = {"id": "cu_sc_1", "code": "irrelevant_domain", "message": "cancelling a plan"}
    turn = openai.run(
        {
            "type": "computer_call",
            "call_id": "c1",
            "actions": [{"type": "click", "button": "left", "x": PLAN_E_CANCEL[0], "y": PLAN_E_CANCEL[1]}],
            "pending_safety_checks": [check],
        }
    )
    operator.join(25)
    assert denied and not turn.ok and "APPROVAL_DENIED" in turn.message, turn.message
    assert "acknowledged_safety_checks" not in turn.output
    time.sleep(0.3)
    assert plans.cancelled() == []
