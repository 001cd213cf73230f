"""Attack probes on the page: clickjacking, shadow DOM, focus theft, buttons re-targeted
after the check, implicit submission, labels.

Two loopback origins: ``home`` (``127.0.0.1``, the only one granted) and ``elsewhere``
(``localhost``, another port: another origin and another site), each counting every request
it receives. Each probe asserts the safe behaviour; the eleven that failed when they were
written (found by trying them) pass since the guard was fixed.
"""

from __future__ import annotations

import time

import pytest

from handrail.executor import Outcome
from tests.conftest import AgentSetup, Stack
from tests.executor.attacks import (
    NOT_STARTED,
    Origins,
    home_posts,
    open_probe,
    posts_elsewhere,
)

pytestmark = pytest.mark.browser

# -- 2. clickjacking by CSS ------------------------------------------------------------------


def test_a_transparent_control_over_the_cited_one_never_takes_the_click(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    session = open_probe(stack, agent, origins, "/jack")
    before = len(origins.reached("home", "POST"))
    r = session.click(session.find("button", "Save"), timeout_ms=2000)
    assert r.result.outcome in NOT_STARTED and not r.result.execution_started, r.result
    assert "covered" in r.result.message, r.result.message
    time.sleep(0.3)
    assert home_posts(origins, before) == []


def test_a_control_the_pointer_goes_through_cannot_be_cited(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    # "Save" lets the pointer through (pointer-events: none) to a near-transparent "Delete
    # account": the snapshot gives "Save" no ref, only the control a click would reach.
    session = open_probe(stack, agent, origins, "/jack-through")
    with pytest.raises(LookupError):
        session.find("button", "Save")
    r = session.click(session.find("button", "Delete account"), timeout_ms=2000)
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "POLICY_FORBID"), r.result
    assert origins.reached("home", "POST", "/close") == []


# -- 3. shadow DOM -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        "light",
        "open",
    ],
)
def test_a_yes_in_a_closing_dialog_needs_a_delete_grant_in_a_shadow_root_too(
    stack: Stack, agent: AgentSetup, origins: Origins, where: str
) -> None:
    session = open_probe(stack, agent, origins, f"/dialog-{where}")
    yes = session.find_element("button", "Yes")
    assert yes.dialog is not None and yes.dialog.name == "Close your account?"  # the agent sees the dialog
    r = session.click(yes.ref, timeout_ms=3000)
    closed = origins.settled("home", "POST", "/close", wait_s=0.5)
    assert closed == [], (r.result.outcome, r.result.reason, r.result.message)
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "POLICY_FORBID"), r.result


def test_a_closed_shadow_root_is_out_of_the_agents_reach(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    session = open_probe(stack, agent, origins, "/dialog-closed")
    with pytest.raises(LookupError):
        session.find("button", "Yes")


# -foreign: the root is attached through a frame's attachShadow, which the page script never
# wrapped, after the observer saw its host arrive without one: the guard watches no such
# root, and refuses what sits in it.
@pytest.mark.parametrize("page", ["/shadow-rows", "/shadow-rows-foreign"])
def test_rows_repainted_inside_a_shadow_root_never_take_a_click_meant_for_another_row(
    stack: Stack, agent: AgentSetup, origins: Origins, page: str
) -> None:
    session = open_probe(stack, agent, origins, page)
    ref = session.find("button", "Cancel", within=("row", "Plan E"))
    before = len(origins.reached("home", "POST"))
    origins.run_js("window.repaint()")  # the very button now sits in the row of Plan F
    r = session.click(ref, timeout_ms=2000)
    time.sleep(0.3)
    cancelled = [p[3] for p in home_posts(origins, before) if p[2] == "/cancel"]
    wrong = [body for body in cancelled if body != "plan=E"]
    assert wrong == [], (r.result.outcome, r.result.message, cancelled)
    assert r.result.outcome in NOT_STARTED and r.result.reason == "STALE_REF", r.result


def test_an_uncovered_control_in_a_shadow_root_can_be_clicked(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    # The check's hit test goes through the open shadow root: the host is not a cover.
    session = open_probe(stack, agent, origins, "/shadow-view")
    r = session.click(session.find("button", "Save"), timeout_ms=3000)
    assert r.result.outcome is Outcome.DONE, r.result
    assert [p[3] for p in origins.settled("home", "POST", "/save")] == ["saved=yes"]


def test_a_veil_drawn_in_a_shadow_root_over_a_slotted_control_is_a_cover(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    session = open_probe(stack, agent, origins, "/shadow-view")
    before = len(origins.reached("home", "POST"))
    r = session.click(session.find("button", "Publish"), timeout_ms=2000)
    assert r.result.outcome in NOT_STARTED and not r.result.execution_started, r.result
    assert "covered" in r.result.message, r.result.message
    time.sleep(0.3)
    assert home_posts(origins, before) == []


# -- 4. focus theft while typing -----------------------------------------------------------


# fill inserts its text with no key events: only the theft on focus applies to it.
@pytest.mark.parametrize(("kind", "how"), [("type", "keydown"), ("type", "focus"), ("fill", "focus")])
def test_keys_never_follow_the_focus_the_page_steals(
    stack: Stack, agent: AgentSetup, origins: Origins, kind: str, how: str
) -> None:
    session = open_probe(stack, agent, origins, f"/steal#{how}")
    nick = session.find("textbox", "Nickname")
    r = session.type(nick, "secret") if kind == "type" else session.fill(nick, "secret")
    assert r.result.outcome is not Outcome.DONE, r.result
    assert r.result.reason == "STALE_REF", r.result
    obs = session.observe()
    password = next(e for e in obs.elements if e.role == "textbox" and e.name == "Password")
    nickname = next(e for e in obs.elements if e.role == "textbox" and e.name == "Nickname")
    assert (password.text, nickname.text) == ("", ""), (password, nickname, r.result)


# -- 5. the button's target switched after the check -------------------------------------


@pytest.mark.parametrize(
    "how",
    [
        "formaction",
        "form",
        "formaction-out",
    ],
)
def test_a_button_retargeted_after_the_check_posts_nowhere_else(
    stack: Stack, agent: AgentSetup, origins: Origins, how: str
) -> None:
    session = open_probe(stack, agent, origins, f"/shop/profile#{how}", path_globs=["/shop/*"])
    before_home, before_else = len(origins.reached("home", "POST")), len(posts_elsewhere(origins, 0))
    r = session.click(session.find("button", "Save"), timeout_ms=3000)
    time.sleep(0.3)
    stray = [p for p in home_posts(origins, before_home) if not p[2].startswith("/shop/")]
    stray += posts_elsewhere(origins, before_else)
    assert stray == [], (r.result.outcome, r.result.reason, r.result.message, stray)


# -- 6b. implicit submission through a default button that posts elsewhere -----------------


def test_enter_in_a_field_is_judged_on_where_its_form_really_posts(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    session = open_probe(stack, agent, origins, "/shop/search", path_globs=["/shop/*"])
    before = len(origins.reached("home", "POST"))
    r = session.press(session.find("textbox", "Query"), "Enter", timeout_ms=3000)
    time.sleep(0.3)
    stray = [p for p in home_posts(origins, before) if not p[2].startswith("/shop/")]
    assert stray == [], (r.result.outcome, r.result.reason, r.result.message, stray)


# -- 6c. a label that forwards the click to the control it is for --------------------------


def test_a_label_never_forwards_a_cited_click_to_another_control(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    session = open_probe(stack, agent, origins, "/label")
    before = len(origins.reached("home", "POST"))
    r = session.click(session.find("button", "Save draft"), timeout_ms=3000)
    time.sleep(0.3)
    closed = [p for p in home_posts(origins, before) if p[2] == "/close"]
    assert closed == [], (r.result.outcome, r.result.reason, r.result.message)
