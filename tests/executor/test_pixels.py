"""Pixel-coordinate actions on a browser page, against the hostile plans app.

An agent that looks at screenshots acts at (x, y) of one. The point is bound to the element
the observation had under it; at dispatch the element under the point must be that one,
unchanged and not covered, and the input guard is armed on it as for a ref click. Each
test is judged by the fixture's real state (which plan was cancelled, which field got the
text).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from handrail.executor import Element, InvalidArgumentError, NotFoundError, Observation, Outcome, Session
from handrail.executor._points import CssPoint, element_at
from handrail.recorder import Ledger
from handrail.scenarios import PlansApp
from tests.conftest import AgentSetup, Stack
from tests.executor.hostile import profile_settled, settled_cancellations

pytestmark = pytest.mark.browser

NOT_STARTED = (Outcome.REFUSED, Outcome.FAILED)


@pytest.fixture
def plans() -> Iterator[PlansApp]:
    with PlansApp() as app:
        yield app


def _open(stack: Stack, agent: AgentSetup, app: PlansApp, path: str, **scope: object) -> Session:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate"], [app.url])  # the start page
        ops.grant(agent.principal.name, agent.target, ["submit", "input"], [app.url], **scope)
    return agent.client.open_session(target=agent.target, start_url=app.url + path)


def _cancel_of(obs: Observation, plan: str) -> Element:
    return next(
        e for e in obs.elements if e.role == "button" and e.row is not None and plan in e.row.name.split(" €")[0]
    )


def _centre(element: Element, scale: float = 1.0) -> tuple[int, int]:
    box = element.box
    assert box is not None, element
    return round((box.x + box.width / 2) * scale), round((box.y + box.height / 2) * scale)


def test_a_point_of_a_screenshot_clicks_the_element_under_it(stack: Stack, agent: AgentSetup, plans: PlansApp) -> None:
    session = _open(stack, agent, plans, "/")
    obs = session.observe(screenshot=True)
    cancel = _cancel_of(obs, "Plan E")
    r = session.click_at(*_centre(cancel))
    assert (r.result.outcome, r.result.execution_started) == (Outcome.DONE, True), r.result
    assert settled_cancellations(plans, ["E"]) == ["E"]
    # The ledger names the element the point was bound to, as for a ref, with the point.
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        intent = ledger.entries(session_id=session.session_id, kind="intent")[-1]
    params = intent.body["params"]
    assert (params["ref"], params["role"], params["name"]) == (cancel.ref, "button", "Cancel"), params
    assert params["point_space"] == "screenshot" and params["context"]["row"].startswith("row Plan E"), params


def test_a_scaled_screenshot_maps_back_to_css_pixels(stack: Stack, agent: AgentSetup, plans: PlansApp) -> None:
    session = _open(stack, agent, plans, "/")
    obs = session.observe(screenshot=True, screenshot_scale=0.5)
    assert obs.screenshot_scale == 0.5
    # Plan F's button at half scale: read as CSS pixels, the point would be near Plan C's.
    x, y = _centre(_cancel_of(obs, "Plan F"), 0.5)
    assert session.click_at(x, y).result.outcome is Outcome.DONE
    assert settled_cancellations(plans, ["F"]) == ["F"]
    # Read as CSS pixels, the same numbers are over something else.
    assert element_at(obs.elements, CssPoint(x, y)) != _cancel_of(obs, "Plan F")


def test_a_point_outside_the_viewport_is_invalid_and_names_the_field(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    session = _open(stack, agent, plans, "/")
    session.observe(screenshot=True, screenshot_scale=0.5)
    with pytest.raises(InvalidArgumentError) as bad:
        session.click_at(700, 10)  # 1400 CSS pixels: the viewport is 1280 wide
    assert bad.value.field == "x" and "outside the viewport" in str(bad.value)
    with pytest.raises(InvalidArgumentError) as bad:
        session.click_at(10, -1, css=True)
    assert bad.value.field == "y"
    with pytest.raises(InvalidArgumentError) as bad:
        session.drag_at(10, 10, 10, 900, css=True)
    assert bad.value.field == "to_y"
    session.observe()  # no screenshot: screenshot pixels mean nothing
    with pytest.raises(InvalidArgumentError) as bad:
        session.click_at(10, 10)
    assert bad.value.field == "point_space"
    with pytest.raises(NotFoundError) as missing:  # the page's empty margin: nothing to click
        session.click_at(1270, 790, css=True)
    assert missing.value.field == "x"
    assert plans.cancelled() == []


def test_a_row_repainted_by_index_before_the_press_stops_the_point_click(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    # The first pointermove over a Cancel button rotates the rows: the button under the
    # point now sits in another plan's row.
    session = _open(stack, agent, plans, "/?rerender=pointermove")
    obs = session.observe(screenshot=True)
    r = session.click_at(*_centre(_cancel_of(obs, "Plan E")))
    result = r.result
    assert (result.outcome, result.reason, result.execution_started) == (Outcome.FAILED, "STALE_REF", False), result
    assert "Plan E" in result.message and "row" in result.message, result.message
    assert settled_cancellations(plans, [], wait_s=0.3) == []


def test_rows_repainted_on_a_timer_never_take_a_point_click_meant_for_another_row(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    session = _open(stack, agent, plans, "/?rerender=timer:31")
    asked = []
    for plan in ("Plan E", "Plan B", "Plan G", "Plan D"):
        obs = session.observe(screenshot=True, screenshot_scale=0.5)
        r = session.click_at(*_centre(_cancel_of(obs, plan), 0.5), timeout_ms=1500, skip_reobserve=True)
        if r.result.outcome is Outcome.DONE:
            asked.append(plan.removeprefix("Plan "))
        else:
            assert r.result.outcome in NOT_STARTED and not r.result.execution_started, r.result
            assert r.result.reason in ("STALE_REF", "TARGET_CHANGED"), r.result
    assert settled_cancellations(plans, asked) == asked


def test_an_overlay_arriving_over_the_point_is_refused_as_another_target(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    # After the screenshot, the page opens a modal survey (and its backdrop) over
    # everything: what is under the point is no longer what the agent saw there.
    session = _open(stack, agent, plans, "/")
    obs = session.observe(screenshot=True)
    assert plans.wait_modal_opened(plans.push_open_modal())
    r = session.click_at(*_centre(_cancel_of(obs, "Plan E")))
    result = r.result
    assert (result.outcome, result.reason, result.execution_started) == (Outcome.REFUSED, "TARGET_CHANGED", False)
    assert "fixture-notice" in result.message and "under the point now" in result.message, result.message
    assert plans.cancelled() == []


def test_rows_repainted_by_index_after_the_screenshot_refuse_the_point(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    # Between the screenshot and the click the rows rotate: the very button node under
    # the point sits in Plan D's row now.
    session = _open(stack, agent, plans, "/")
    obs = session.observe(screenshot=True)
    assert plans.wait_rerendered(plans.push_rerender())
    r = session.click_at(*_centre(_cancel_of(obs, "Plan E")))
    result = r.result
    assert (result.outcome, result.reason, result.execution_started) == (Outcome.REFUSED, "STALE_REF", False)
    assert "row" in result.message and "Plan E" in result.message, result.message
    assert settled_cancellations(plans, [], wait_s=0.3) == []


def test_an_overlay_that_comes_with_the_pointer_never_gets_the_point_click(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    session = _open(stack, agent, plans, "/?overlay=hover")
    obs = session.observe(screenshot=True)
    r = session.click_at(*_centre(_cancel_of(obs, "Plan C")))
    result = r.result
    assert (result.outcome, result.reason, result.execution_started) == (Outcome.FAILED, "TARGET_CHANGED", False)
    state = plans.state()
    assert (state["cancel_all"], plans.cancelled()) == (0, []), state


def test_the_sidecar_decides_on_the_element_under_the_point(stack: Stack, agent: AgentSetup, plans: PlansApp) -> None:
    # Granted "Pause plan" only: a point on "Delete account" is refused as a ref would be.
    session = _open(stack, agent, plans, "/account", name_patterns=["Pause plan"])
    obs = session.observe(screenshot=True)
    delete = next(e for e in obs.elements if e.name == "Delete account")
    r = session.click_at(*_centre(delete))
    assert (r.result.outcome, r.result.execution_started) == (Outcome.REFUSED, False), r.result
    assert r.result.reason in ("OUT_OF_SCOPE", "POLICY_FORBID"), r.result
    assert plans.state()["account_deleted"] is False
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        refusal = ledger.entries(session_id=session.session_id, kind="refusal")[-1]
    assert (refusal.body["role"], refusal.body["name"]) == ("button", "Delete account")
    pause = next(e for e in session.observe(screenshot=True).elements if e.name == "Pause plan")
    assert session.click_at(*_centre(pause)).result.outcome is Outcome.DONE
    assert "pause" in plans.state()["actions"]


def test_typing_at_a_point_goes_into_the_field_there_and_stops_when_it_changes(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    session = _open(stack, agent, plans, "/profile")
    obs = session.observe(screenshot=True)
    email = next(e for e in obs.elements if e.role == "textbox" and e.name == "Email")
    r = session.type_at(*_centre(email), "ada@example.com")
    assert r.result.outcome is Outcome.DONE, r.result
    assert profile_settled(plans) == {"email": "ada@example.com", "phone": ""}


def test_typing_at_a_point_whose_field_changes_on_focus_types_nothing(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    session = _open(stack, agent, plans, "/profile?swap=focus")
    obs = session.observe(screenshot=True)
    email = next(e for e in obs.elements if e.role == "textbox" and e.name == "Email")
    r = session.type_at(*_centre(email), "ada@example.com")
    result = r.result
    assert result.outcome in NOT_STARTED and result.reason == "STALE_REF" and result.typed_chars == 0, result
    assert "label" in result.message, result.message
    assert profile_settled(plans) == {"email": "", "phone": ""}
