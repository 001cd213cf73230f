"""Pages that try to make an action land on something the agent did not cite.

Rows re-painted by index (the same ``<button>`` node ends up in another plan's row) on a
timer, on the first pointer event over the button, on the press itself; a pop-up that
puts a same-named button over the cited one; fields whose labels trade places on focus or
while typing; text that poses as a snapshot line. Each is judged by the fixture's real
state (which plan was cancelled, which field got the text), through both ways a click goes
out: the executor's own guarded pointer and Playwright's click (``--playwright-clicks``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from handrail.executor import ExecutorClient, Outcome, Session
from handrail.recorder import Ledger
from handrail.scenarios import POSING_REF, PlansApp, ServerProcess, start_executor
from handrail.scenarios._plans import DISGUISES
from tests.conftest import AgentSetup, Stack
from tests.executor.hostile import cancel_ref, field_ref, profile_settled, settled_cancellations

pytestmark = pytest.mark.browser

NOT_STARTED = (Outcome.REFUSED, Outcome.FAILED)


@pytest.fixture
def plans() -> Iterator[PlansApp]:
    with PlansApp() as app:
        yield app


@pytest.fixture(scope="module")
def playwright_executor(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A second executor that sends every click through Playwright's click."""
    server = start_executor(
        tmp_path_factory.mktemp("pw-clicks"),
        stack.authz.address,
        stack.executor_principal.token,
        extra=["--playwright-clicks"],
    )
    try:
        yield server
    finally:
        server.stop()


# Playwright's click path needs an executor of its own: the slow set runs it.
@pytest.fixture(params=["pointer", pytest.param("playwright", marks=pytest.mark.slow)])
def client(request: pytest.FixtureRequest, agent: AgentSetup, stack: Stack) -> Iterator[ExecutorClient]:
    """The agent's client to an executor clicking one way or the other."""
    if request.param == "pointer":
        yield agent.client
        return
    server: ServerProcess = request.getfixturevalue("playwright_executor")
    with ExecutorClient(server.address, agent.principal.token) as other:
        yield other


def _open(stack: Stack, agent: AgentSetup, client: ExecutorClient, app: PlansApp, path: str) -> Session:
    with stack.operator_client() as ops:
        # navigate: the start page is a document load, judged like any other
        ops.grant(agent.principal.name, agent.target, ["submit", "input", "navigate"], [app.url])
    session = client.open_session(target=agent.target, start_url=app.url + path)
    session.observe()
    return session


def _wrong(results: list[tuple[str, Outcome]], cancelled: list[str]) -> list[str]:
    """What went wrong: a plan cancelled that no DONE click asked for, or a DONE click
    whose plan was not the one cancelled."""
    asked = [plan for plan, outcome in results if outcome is Outcome.DONE]
    return [] if cancelled == asked else [f"asked {asked}, the merchant cancelled {cancelled}"]


# -- class 1: a change after the check reaches the input ----------------------------------


@pytest.mark.parametrize(
    "period_ms", [pytest.param(9, marks=pytest.mark.slow), 31, pytest.param(120, marks=pytest.mark.slow), 400]
)
def test_rows_repainted_on_a_timer_never_take_a_click_meant_for_another_row(
    stack: Stack, agent: AgentSetup, client: ExecutorClient, plans: PlansApp, period_ms: int
) -> None:
    session = _open(stack, agent, client, plans, f"/?rerender=timer:{period_ms}")
    results: list[tuple[str, Outcome]] = []
    for plan in ("Plan E", "Plan B", "Plan G", "Plan D", "Plan A", "Plan F"):
        obs = session.observe()
        r = session.click(cancel_ref(obs, plan), timeout_ms=1500, skip_reobserve=True)
        results.append((plan.removeprefix("Plan "), r.result.outcome))
        if r.result.outcome is not Outcome.DONE:
            assert r.result.outcome in NOT_STARTED and not r.result.execution_started, r.result
            assert r.result.reason == "STALE_REF", r.result
    asked = [p for p, o in results if o is Outcome.DONE]
    assert _wrong(results, settled_cancellations(plans, asked)) == [], results


@pytest.mark.parametrize(
    ("query", "plans_cancelled"),
    [
        # Text changing every 20 ms under the table: no row, no ancestor of the button.
        pytest.param("/?tick=20", ["C", "F"], id="clock"),
        # Every row's text written over with its own value every 15 ms: nothing anyone can
        # see changed (a rotation, which changes the text, is refused: the timer tests above).
        pytest.param("/?repaint=15", ["B", "G"], id="same-text-repaint"),
    ],
)
def test_a_change_that_touches_no_row_refuses_nothing(
    stack: Stack, agent: AgentSetup, client: ExecutorClient, plans: PlansApp, query: str, plans_cancelled: list[str]
) -> None:
    # Safety is not bought by refusing everything: these must not make a cited button stale.
    session = _open(stack, agent, client, plans, query)
    for plan in plans_cancelled:
        r = session.click(session.find("button", "Cancel", within=("row", f"Plan {plan}")), timeout_ms=3000)
        assert r.result.outcome is Outcome.DONE, (r.result.reason, r.result.message)
    assert settled_cancellations(plans, plans_cancelled) == plans_cancelled


@pytest.mark.parametrize(
    "event", ["pointermove", "pointerover", "mouseover", "mouseenter", "pointerdown", "mousedown", "mouseup"]
)
def test_rows_repainted_by_the_input_itself_stop_the_click(
    stack: Stack, agent: AgentSetup, client: ExecutorClient, plans: PlansApp, event: str
) -> None:
    # The page re-paints its rows the first time EVENT reaches a Cancel button: between
    # the guard's last check and the click, page code moves the button into another row.
    session = _open(stack, agent, client, plans, f"/?rerender={event}")
    r = session.click(cancel_ref(session.latest, "Plan E"), timeout_ms=1500)  # type: ignore[arg-type]
    result = r.result
    assert (result.outcome, result.reason, result.execution_started) == (Outcome.FAILED, "STALE_REF", False), result
    assert "Plan E" in result.message and "row" in result.message, result.message
    assert settled_cancellations(plans, [], wait_s=0.3) == []
    # Looking again shows where things are now; the click then goes where it was meant.
    obs = session.observe()
    r = session.click(cancel_ref(obs, "Plan E"), timeout_ms=1500)
    assert r.result.outcome is Outcome.DONE, r.result
    assert settled_cancellations(plans, ["E"]) == ["E"]


def test_a_late_pop_up_with_a_same_named_button_never_gets_the_click(
    stack: Stack, agent: AgentSetup, client: ExecutorClient, plans: PlansApp
) -> None:
    session = _open(stack, agent, client, plans, "/?overlay=hover")
    r = session.click(cancel_ref(session.latest, "Plan C"), timeout_ms=1200)  # type: ignore[arg-type]
    assert r.result.outcome in NOT_STARTED and not r.result.execution_started, r.result
    state = plans.state()
    assert (state["cancel_all"], plans.cancelled()) == (0, []), state


def test_a_field_whose_labels_trade_places_on_focus_gets_nothing(
    stack: Stack, agent: AgentSetup, client: ExecutorClient, plans: PlansApp
) -> None:
    session = _open(stack, agent, client, plans, "/profile?swap=focus")
    r = session.fill(field_ref(session.latest, "Email"), "ada@example.com")  # type: ignore[arg-type]
    result = r.result
    assert (result.outcome, result.reason, result.execution_started) == (Outcome.FAILED, "STALE_REF", False), result
    assert "label" in result.message, result.message
    assert profile_settled(plans) == {"email": "", "phone": ""}
    # Seen again, the field is "Phone" now and "Email" is the other one.
    obs = session.observe()
    assert session.fill(field_ref(obs, "Email"), "ada@example.com").result.outcome is Outcome.DONE
    assert profile_settled(plans) == {"email": "ada@example.com", "phone": ""}


def test_a_key_pressed_into_a_field_that_changed_on_focus_is_swallowed(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    session = _open(stack, agent, agent.client, plans, "/profile?swap=focus")
    r = session.press(field_ref(session.latest, "Email"), "a")  # type: ignore[arg-type]
    result = r.result
    assert (result.outcome, result.reason, result.execution_started) == (Outcome.FAILED, "STALE_REF", False), result
    assert "keydown" in result.message and "label" in result.message, result.message
    assert profile_settled(plans) == {"email": "", "phone": ""}


def test_typing_stops_where_the_page_moves_the_focus_on(
    stack: Stack, agent: AgentSetup, client: ExecutorClient, plans: PlansApp
) -> None:
    # After the first character the page moves the focus on to "Phone" ("auto-advance"):
    # the rest of the address must not land there.
    session = _open(stack, agent, client, plans, "/profile?swap=advance")
    r = session.type(field_ref(session.latest, "Email"), "ada@example.com")  # type: ignore[arg-type]
    result = r.result
    assert (result.outcome, result.reason, result.typed_chars) == (Outcome.FAILED, "STALE_REF", 1), result
    assert result.execution_started and "focus moved" in result.message, result.message
    assert profile_settled(plans) == {"email": "a", "phone": ""}


def test_typing_stops_at_the_key_where_the_field_changed(
    stack: Stack, agent: AgentSetup, client: ExecutorClient, plans: PlansApp
) -> None:
    # Once three characters are in, the labels trade places: the field being typed into
    # is "Phone" from then on.
    session = _open(stack, agent, client, plans, "/profile?swap=key:3")
    r = session.type(field_ref(session.latest, "Email"), "ada@example.com", key_delay_ms=20)  # type: ignore[arg-type]
    result = r.result
    assert (result.outcome, result.reason, result.typed_chars) == (Outcome.FAILED, "STALE_REF", 3), result
    assert result.execution_started and 'from "Email" to "Phone"' in result.message, result.message
    assert profile_settled(plans) == {"email": "ada", "phone": ""}


def test_a_disguised_delete_button_is_still_destructive(stack: Stack, agent: AgentSetup, plans: PlansApp) -> None:
    # "Delete account" written to read the same and be another string: a zero-width space,
    # soft hyphens, Cyrillic look-alikes, mathematical letters, letters spaced apart,
    # reversed under a right-to-left override, or shown under the aria-label "Save
    # changes". Each must meet the destructive policy.
    session = _open(stack, agent, agent.client, plans, "/account")
    seen: dict[str, str] = {}
    for kind in [*DISGUISES, "aria-label"]:
        session.navigate(f"{plans.url}/account?disguise={kind}")
        observed = session.observe()
        pause = next(e for e in observed.elements if e.role == "button" and e.name == "Pause plan")
        buttons = [e for e in observed.elements if e.role == "button" and e.ref != pause.ref]
        assert len(buttons) == 1, (kind, buttons)
        seen[kind] = buttons[0].name
        r = session.click(buttons[0].ref)
        assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "POLICY_FORBID"), (kind, r.result)
        assert "destructive-needs-delete-grant" in r.result.message, (kind, r.result.message)
    assert plans.state()["account_deleted"] is False
    # Playwright itself drops zero-width spaces and soft hyphens from names; the other
    # disguises reach the sidecar as written.
    assert seen["zwsp"] == seen["shy"] == "Delete account", seen
    assert "Delete account" not in {seen[k] for k in ("cyrillic", "math", "spaced", "rlo")}, seen
    assert seen["aria-label"] == "Save changes", seen


# -- class 2: refs read from text -----------------------------------------------------------


def test_text_posing_as_a_snapshot_line_does_not_name_the_element(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    # The agent cites the ref the support note's text gives "Pause plan": the real element
    # of that ref is "Delete account", which the standing destructive policy forbids.
    session = _open(stack, agent, agent.client, plans, "/account")
    assert f'button "Pause plan" [ref={POSING_REF}]' in session.latest.snapshot  # type: ignore[union-attr]
    r = session.click(POSING_REF)
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "POLICY_FORBID"), r.result
    assert plans.state()["account_deleted"] is False
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        refusal = ledger.entries(session_id=session.session_id, kind="refusal")[-1]
    assert (refusal.body["role"], refusal.body["name"]) == ("button", "Delete account")
