"""The console in a real Chromium, driven by Playwright as an operator would drive it.

Sign in, see an approval arrive live and approve it, see the agent's request for a person,
take the wheel, click and type in the live view so that the fixture page records the
person's input, hand back — checking each page as a person sees it. With
``HANDRAIL_DOCS_SCREENSHOTS=1`` the pages' screenshots are written to ``docs/``.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from handrail.authz import AuthzClient
from handrail.executor import ExecutorClient, Outcome, PersonStatus
from handrail.executor.browser import CHROMIUM_ARGS, chromium_path
from handrail.scenarios import SECOND_FACTOR_CODE, SecondFactorApp
from tests.console.conftest import ConsoleStack

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 950})
        yield context.new_page()
        browser.close()


def _shot(page: Page, name: str, tmp: Path) -> None:
    page.screenshot(path=str(tmp / f"console-{name}.png"))
    if os.environ.get("HANDRAIL_DOCS_SCREENSHOTS"):
        page.screenshot(path=str(DOCS / f"console-{name}.png"))


def test_an_operator_approves_takes_the_wheel_types_the_code_and_hands_back(
    console_stack: ConsoleStack, page: Page, tmp_path: Path
) -> None:
    stack = console_stack
    agent = stack.add("agent", "agent")
    target = f"browser:{agent.name}"
    app = SecondFactorApp()
    app.start()
    try:
        with AuthzClient(stack.authz.address, stack.operator.token) as ops:
            ops.grant(agent.name, target, ["navigate"], [app.url])  # the start page
            ops.grant(
                agent.name,
                target,
                ["input", "submit"],
                [app.url],
                name_patterns=["Turn off auto-renew"],
                require_approval_verbs=["submit"],
                note="turning the renewal off needs my approval",
            )
            ops.grant(agent.name, target, ["input", "submit"], [app.url], name_patterns=["No thanks*", "Verify"])
        client = ExecutorClient(stack.executor.address, agent.token)
        session = client.open_session(target=target, start_url=app.url + "/")
        session.observe()

        # 1. Sign in.
        page.goto(stack.console.url + "/")
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        _shot(page, "signin", tmp_path)
        page.get_by_label("Operator token").fill(stack.operator.token)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        expect(page.get_by_text(f"{stack.operator.name} (operator)")).to_be_visible()

        # 2. An approval arrives live; the operator reads it and approves it.
        done: dict[str, Any] = {}

        def agent_clicks() -> None:
            done["r"] = session.click(session.find("button", "Turn off auto-renew"), approval_wait_ms=30_000).result

        worker = threading.Thread(target=agent_clicks)
        worker.start()
        link = page.get_by_role("link", name=f"{agent.name} · submit button “Turn off auto-renew”")
        expect(link).to_be_visible(timeout=15_000)  # no reload: the overview is live
        _shot(page, "overview-approval", tmp_path)
        link.click()
        expect(
            page.get_by_role("heading", name=f"{agent.name} asks to submit button “Turn off auto-renew”")
        ).to_be_visible()
        expect(page.get_by_text("PENDING")).to_be_visible()
        expect(page.locator("pre.snapshot").first).to_contain_text("Turn off auto-renew")
        _shot(page, "approval", tmp_path)
        page.get_by_label("Note").fill("yes, the customer asked for it")
        page.get_by_role("button", name="Approve").click()
        # approved, or already used by the agent's waiting click when the page renders
        expect(page.locator("#approval-status")).to_have_text(re.compile(r"^(APPROVED|USED)$"))
        expect(page.get_by_text(f"by {stack.operator.name}: “yes, the customer asked for it”")).to_be_visible()
        expect(page.get_by_text("cannot be decided again")).to_be_visible()
        worker.join(30)
        assert done["r"].outcome is Outcome.DONE, done["r"].message

        # 3. The agent meets the second factor and asks for a person.
        session.observe()
        session.click(
            session.find("button", "No thanks, turn off renewal"), expect_text="Enter the code"
        ).raise_for_outcome()
        session.observe()
        asked = session.ask_for_person("Enter the code sent to your phone")
        back: dict[str, Any] = {}
        waiter = threading.Thread(
            target=lambda: back.update(r=session.ask_for_person(request_id=asked.request_id, wait_ms=60_000))
        )
        waiter.start()
        page.goto(stack.console.url + "/")
        expect(page.get_by_text("Enter the code sent to your phone")).to_be_visible(timeout=10_000)
        _shot(page, "overview-ask", tmp_path)
        page.get_by_role("link", name="Open the session").click()

        # 4. Take the wheel; click the code field in the live view, type the code, press Enter.
        page.wait_for_function("window.__console && window.__console.frames > 0", timeout=15_000)
        page.get_by_role("button", name="Take the wheel").click()
        expect(page.get_by_text("You hold the wheel")).to_be_visible()
        found = page.request.get(f"{stack.console.url}/api/sessions/{session.session_id}/locate?role=textbox&name=Code")
        assert found.ok, found.text()
        box = (found.json()["x"], found.json()["y"], found.json()["width"], found.json()["height"])
        img = page.locator("#screen").bounding_box()
        assert img is not None
        x = img["x"] + (box[0] + box[2] / 2) * img["width"] / 1280
        y = img["y"] + (box[1] + box[3] / 2) * img["height"] / 800
        page.mouse.click(x, y)
        page.keyboard.type(SECOND_FACTOR_CODE)
        page.keyboard.press("Enter")

        def typed(st: dict[str, Any]) -> bool:  # the code went in, and the page reported every key
            return bool(st["verified"]) and [i["key"] for i in st["inputs"] if i["kind"] == "key"][-1:] == ["Enter"]

        deadline = time.monotonic() + 15
        while not typed(app.state()) and time.monotonic() < deadline:
            time.sleep(0.1)
        state = app.state()
        assert state["verified"] and state["code_entered"] == SECOND_FACTOR_CODE and state["auto_renew"] is False
        clicks = [i for i in state["inputs"] if i["kind"] == "click"]
        keys = [i for i in state["inputs"] if i["kind"] == "key"]
        assert clicks and clicks[0]["target"] == "code" and clicks[0]["trusted"]
        assert [k["key"] for k in keys][-7:] == [*SECOND_FACTOR_CODE, "Enter"] and all(k["trusted"] for k in keys)
        expect(page.locator("#timeline")).to_contain_text(f"human:{stack.operator.name}")
        page.wait_for_function("window.__console.frames > 3", timeout=10_000)
        _shot(page, "session", tmp_path)

        # The agent's write is refused while the person holds the wheel.
        r = session.click(session.find("button", "Verify")).result
        assert (r.outcome, r.reason) == (Outcome.REFUSED, "HELD_BY_HUMAN")

        # 5. Hand back to the agent: its wait ends; it observes again and finds the renewal off.
        page.get_by_role("button", name=f"Hand back to {agent.name}").click()
        expect(page.get_by_text(f"Handed back to {agent.name}")).to_be_visible()
        waiter.join(30)
        assert back["r"].status is PersonStatus.HANDED_BACK and back["r"].taken_by == stack.operator.name
        obs = session.observe()
        assert "Auto-renew is off" in obs.snapshot
        session.close()
        client.close()
    finally:
        app.stop()
