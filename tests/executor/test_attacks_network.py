"""Attack probes on scope: actions in frames of other origins, requests to other origins. Each asserts the SAFE
behaviour.

Two loopback origins: ``home`` (``127.0.0.1``, the only one granted) and ``elsewhere``
(``localhost``, another port: another origin and another site), each counting every request
it receives. A probe that fails on today's code is a leak found: it is kept, marked
``xfail(strict=True, reason="LEAK: ...")``, so the suite stays green while recording it.
"""

from __future__ import annotations

import time

import pytest

from handrail.executor import Outcome
from tests.conftest import AgentSetup, Stack
from tests.executor.attacks import (  # noqa: F401
    NOT_STARTED,
    Origins,
    entries,
    frame_ready,
    home_posts,
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
        pytest.param(
            "Save by beacon",
            marks=pytest.mark.xfail(
                strict=True,
                reason="LEAK: navigator.sendBeacon from an allowed click's handler POSTs to an ungranted "
                "origin: NetworkGate._route only reports side-effecting subresources, never judges them",
            ),
        ),
        pytest.param(
            "Save by fetch",
            marks=pytest.mark.xfail(
                strict=True,
                reason="LEAK: a no-cors fetch POST from an allowed click's handler reaches an ungranted "
                "origin: NetworkGate._route continues every non-document request unjudged",
            ),
        ),
        pytest.param(
            "Save by frame",
            marks=pytest.mark.xfail(
                strict=True,
                reason="LEAK: form.submit() into a child frame (target=sink) POSTs to an ungranted origin: "
                "the Fetch gate holds only the main frame's documents (NetworkGate._paused)",
            ),
        ),
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


def test_a_submit_button_posting_into_a_frame_is_judged_on_its_form(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    session = open_probe(stack, agent, origins, "/out")
    before = len(posts_elsewhere(origins, 0))
    r = session.click(session.find("button", "Send into the frame"), timeout_ms=3000)
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "OUT_OF_SCOPE"), r.result
    time.sleep(0.3)
    assert posts_elsewhere(origins, before) == []


@pytest.mark.xfail(
    strict=True,
    reason="LEAK: <a ping=ELSE/ping> on an in-scope link: the click is judged on the link's URL only "
    "(_context.READ_CONTEXT ignores ping) and Chromium's ping POST goes out unjudged (NetworkGate._route)",
)
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
