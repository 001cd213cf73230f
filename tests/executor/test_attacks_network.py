"""Attack probes on scope: actions in frames of other origins, requests to other origins.

Two loopback origins: ``home`` (``127.0.0.1``, the only one granted) and ``elsewhere``
(``localhost``, another port: another origin and another site), each counting every request
it receives. Each probe asserts the safe behaviour; the eleven that failed when they were
written (found by trying them) pass since the guard was fixed. Four of probe 7 (an allowed
action's page leaving the grant's paths on the same origin) reached ``/admin/``: three until
an action's own loads were narrowed from its origins to its URLs, and the form posting
outside a single-use grant's paths until a spent grant stopped covering its action's
effects whatever their path.
"""

from __future__ import annotations

import time

import pytest

from handrail.executor import Outcome
from tests.conftest import AgentSetup, Stack
from tests.executor.attacks import (
    Origins,
    entries,
    frame_ready,
    open_probe,
    posts_elsewhere,
)

pytestmark = pytest.mark.browser

# -- 1. cross-origin iframes -------------------------------------------------------------


def test_a_click_in_a_frame_of_an_ungranted_origin_sends_it_nothing(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    session = open_probe(stack, agent, origins, "/frame")
    ref = frame_ready(session, "button", "Pay in widget")
    before = len(posts_elsewhere(origins, 0))
    r = session.click(ref, timeout_ms=3000)
    sent = posts_elsewhere(origins, before)
    if not sent:
        time.sleep(0.5)
        sent = posts_elsewhere(origins, before)
    assert sent == [], (r.result.outcome, r.result.reason, r.result.message, sent)
    # judged on the frame's origin, which no grant names
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "OUT_OF_SCOPE"), r.result
    assert origins.elsewhere in r.result.message, r.result.message


def test_a_form_in_a_frame_of_an_ungranted_origin_is_refused(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    session = open_probe(stack, agent, origins, "/frame")
    ref = frame_ready(session, "button", "Send card")
    before = len(posts_elsewhere(origins, 0))
    r = session.click(ref, timeout_ms=3000)
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "OUT_OF_SCOPE"), r.result
    assert origins.elsewhere in r.result.message, r.result.message
    time.sleep(0.3)
    assert posts_elsewhere(origins, before) == []


def test_typing_into_a_frame_of_an_ungranted_origin_sends_it_nothing(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    session = open_probe(stack, agent, origins, "/frame")
    ref = frame_ready(session, "textbox", "Card number")
    before = len(posts_elsewhere(origins, 0))
    r = session.fill(ref, "4242424242424242", timeout_ms=3000)
    time.sleep(0.3)
    sent = posts_elsewhere(origins, before)
    assert sent == [], (r.result.outcome, r.result.reason, r.result.message, sent)
    # judged on the frame's origin, which no grant names
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "OUT_OF_SCOPE"), r.result
    assert origins.elsewhere in r.result.message, r.result.message


# -- 6. requests to another origin that are no document load ------------------------------


@pytest.mark.parametrize(
    "button",
    [
        "Save by beacon",
        "Save by fetch",
        "Save by frame",
    ],
)
def test_an_allowed_click_sends_nothing_to_an_ungranted_origin(
    stack: Stack, agent: AgentSetup, origins: Origins, button: str
) -> None:
    session = open_probe(stack, agent, origins, "/out")
    before = len(posts_elsewhere(origins, 0))
    r = session.click(session.find("button", button), timeout_ms=3000)
    time.sleep(0.3)
    sent = posts_elsewhere(origins, before)
    assert sent == [], (r.result.outcome, r.result.reason, r.result.message, sent)
    # The click was the agent's to make; what its handler sent elsewhere was refused, and
    # the ledger says so (the result too, when the refusal came before it was written: a
    # form posted into a frame is no request the click waits for).
    assert r.result.outcome is Outcome.DONE, r.result
    deadline = time.monotonic() + 2
    while not (refused := [e for e in entries(stack, session, "navigation") if e["cause"] == "request"]):
        assert time.monotonic() < deadline, entries(stack, session, "navigation")
        time.sleep(0.05)
    assert [(e["allowed"], e["reason"]) for e in refused] == [(False, "OUT_OF_SCOPE")], refused
    assert refused[0]["url"].startswith(origins.elsewhere) and refused[0]["method"] == "POST", refused


def test_a_request_to_another_granted_origin_goes_out(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    session = open_probe(stack, agent, origins, "/out")
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["submit"], [origins.elsewhere])
    before = len(posts_elsewhere(origins, 0))
    r = session.click(session.find("button", "Save by fetch"), timeout_ms=3000)
    assert r.result.outcome is Outcome.DONE, r.result.message
    assert origins.settled("elsewhere", "POST", "/collect", wait_s=2.0)
    assert len(posts_elsewhere(origins, before)) == 1


def test_a_submit_button_posting_into_a_frame_is_judged_on_its_form(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    session = open_probe(stack, agent, origins, "/out")
    before = len(posts_elsewhere(origins, 0))
    r = session.click(session.find("button", "Send into the frame"), timeout_ms=3000)
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "OUT_OF_SCOPE"), r.result
    time.sleep(0.3)
    assert posts_elsewhere(origins, before) == []


def test_a_link_ping_to_an_ungranted_origin_never_leaves(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    session = open_probe(stack, agent, origins, "/out")
    before = len(posts_elsewhere(origins, 0))
    r = session.click(session.find("link", "Inside page"), timeout_ms=3000)
    assert r.result.outcome is Outcome.DONE, r.result  # the link itself is in scope
    sent = origins.settled("elsewhere", "POST", "/ping", wait_s=1.0)
    assert posts_elsewhere(origins, before) == [], sent


def test_a_page_cannot_install_a_service_worker(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    # (register() may still resolve: what matters is that no worker is fetched or answers.)
    session = open_probe(stack, agent, origins, "/worker")
    deadline = time.monotonic() + 3
    while "pending" in session.observe().snapshot and time.monotonic() < deadline:
        time.sleep(0.1)
    for _ in range(2):
        r = session.navigate(origins.home + "/inside")
        assert r.observation is not None and "Forged" not in r.observation.snapshot, r.observation.snapshot
    assert origins.reached("home", "GET", "/sw.js") == []
    assert len(origins.reached("home", "GET", "/inside")) >= 2  # each load reached the server


# -- 7. an allowed action's own page leaves the granted paths --------------------------------


@pytest.mark.parametrize(
    ("page", "name", "method", "reached"),
    [
        ("/shop/jump", "Next", "GET", "/admin/panel"),  # location.href, from the click's handler
        ("/shop/post", "Save", "POST", "/admin/close-account"),  # a form the handler builds
        ("/shop/moved-form", "Save", "GET", "/admin/panel"),  # the server's 303 after the post
    ],
)
def test_a_load_an_allowed_action_causes_is_judged_on_its_own_path(
    stack: Stack, agent: AgentSetup, origins: Origins, page: str, name: str, method: str, reached: str
) -> None:
    session = open_probe(stack, agent, origins, page, path_globs=["/shop/*"])
    r = session.click(session.find("button", name), timeout_ms=3000)
    assert origins.settled("home", method, reached, wait_s=0.5) == [], (r.result.outcome, r.result.message)
    loads = [e for e in entries(stack, session, "navigation") if reached in e.get("url", "")]
    assert loads and not loads[0]["allowed"], loads  # judged by the sidecar, and refused
    assert "OUT_OF_SCOPE" in loads[0]["reason"], loads


def test_a_redirect_after_an_allowed_post_loads_where_the_grant_reaches(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    # The answer to the post, redirected within the granted paths, loads (judged on its own).
    session = open_probe(stack, agent, origins, "/shop/kept-form", path_globs=["/shop/*"])
    r = session.click(session.find("button", "Save"), timeout_ms=3000)
    assert r.result.outcome == Outcome.DONE, r.result
    assert origins.settled("home", "GET", "/shop/thanks", wait_s=1.0) != []
    assert session.observe().title == "Thanks"


@pytest.mark.parametrize("single_use", [False, True])
def test_a_form_on_a_granted_path_posting_outside_it_is_refused(
    stack: Stack, agent: AgentSetup, origins: Origins, single_use: bool
) -> None:
    # Its post is an effect of the click, judged on its own path; a single-use grant, spent
    # by the click's own check, must not stretch to the effect's path either.
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate"], [origins.home], path_globs=["/shop/*"])
    verbs = ("input", "submit")
    session = open_probe(stack, agent, origins, "/shop/out-form", verbs, path_globs=["/shop/*"], single_use=single_use)
    r = session.click(session.find("button", "Save"), timeout_ms=3000)
    assert origins.settled("home", "POST", "/admin/close-account", wait_s=0.5) == [], r.result
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "OUT_OF_SCOPE"), r.result


def test_a_spent_single_use_grant_still_covers_its_actions_effect_within_its_paths(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate"], [origins.home], path_globs=["/shop/*"])
    session = open_probe(
        stack, agent, origins, "/shop/pay-form", ("input", "submit"), path_globs=["/shop/*"], single_use=True
    )
    r = session.click(session.find("button", "Pay"), timeout_ms=3000)
    assert r.result.outcome == Outcome.DONE, r.result
    assert [p[3] for p in origins.settled("home", "POST", "/shop/pay", wait_s=1.0)] == ["amount=10"]
    assert session.navigate(origins.home + "/shop/pay-form").result.outcome == Outcome.DONE
    again = session.click(session.find("button", "Pay"), timeout_ms=3000)  # the grant is spent
    assert (again.result.outcome, again.result.reason) == (Outcome.REFUSED, "GRANT_EXHAUSTED"), again.result
