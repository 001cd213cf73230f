"""``handrail mcp`` driven by the official SDK's own client, over stdio and streamable HTTP,
against the real stack (the session's sidecar and executor, a real Chromium) and the
fixture apps."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp.types import ElicitResult

from handrail.scenarios import POSING_REF, PlansApp, SubscriptionApp
from tests.conftest import AgentSetup, Stack, grant_needing_approval
from tests.mcp.client import (
    http_server,
    http_session,
    mcp_args,
    ref_of,
    stdio_session,
    text,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

READ_ONLY = {"browser_snapshot", "browser_take_screenshot", "browser_wait_for", "handrail_lease_status"}


def _posts(app: Any) -> int:
    state = app.state()
    return sum(
        n for path, n in state["requests"].items() if path.startswith("POST /") and not path.startswith("POST /__")
    )


def test_subscription_task_over_stdio_with_a_stale_ref_handled(
    stack: Stack, agent: AgentSetup, app: SubscriptionApp
) -> None:
    base = app.url
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate", "input", "submit"], [base])
    args = mcp_args(stack.executor.address, agent.principal.token, agent.target, base + "/")

    async def run() -> None:
        async with stdio_session(args) as mcp:
            tools = {t.name: t for t in (await mcp.list_tools()).tools}
            assert {n for n, t in tools.items() if t.annotations and t.annotations.read_only_hint} == READ_ONLY
            snap = text(await mcp.call_tool("browser_snapshot", {}))
            ref = ref_of(snap, "button", "Turn off auto-renew")

            # The page re-renders its buttons between the snapshot and the click.
            app.push_rerender()
            assert app.wait_rerendered(1, timeout=10)
            stale = await mcp.call_tool("browser_click", {"element": "Turn off auto-renew button", "ref": ref})
            assert stale.is_error, text(stale)
            assert "STALE_REF" in text(stale) and "Next: take a new snapshot" in text(stale), text(stale)
            assert _posts(app) == 0

            # The refusal says what to do: observe again, then succeed.
            snap = text(await mcp.call_tool("browser_snapshot", {}))
            ref = ref_of(snap, "button", "Turn off auto-renew")
            done = await mcp.call_tool("browser_click", {"element": "Turn off auto-renew button", "ref": ref})
            assert not done.is_error, text(done)
            ref = ref_of(text(done), "button", "No thanks, turn off renewal")
            done = await mcp.call_tool("browser_click", {"element": "No thanks, turn off renewal", "ref": ref})
            assert not done.is_error, text(done)
            assert "Auto-renew is off" in text(done)

            diff = text(await mcp.call_tool("browser_snapshot", {"diff": True}))
            assert "no change since the previous snapshot" in diff, diff
            status = text(await mcp.call_tool("handrail_lease_status", {}))
            assert "- Lease: held, epoch" in status, status

            # Tabs keep their ids; waits and keys go through the executor too.
            opened = await mcp.call_tool("browser_tabs", {"action": "new", "url": base + "/"})
            assert not opened.is_error, text(opened)
            listed = text(await mcp.call_tool("browser_tabs", {"action": "list"}))
            assert "- t1:" in listed and "- t2: [current]" in listed, listed
            for call in ({"action": "select", "tabId": "t1"}, {"action": "close", "tabId": "t2"}):
                assert not (await mcp.call_tool("browser_tabs", call)).is_error
            left = text(await mcp.call_tool("browser_tabs", {"action": "list"}))
            assert "- t1: [current]" in left and "t2" not in left, left
            waited = await mcp.call_tool("browser_wait_for", {"text": "Auto-renew is off"})
            assert not waited.is_error, text(waited)
            pressed = await mcp.call_tool("browser_press_key", {"key": "Tab"})
            assert not pressed.is_error, text(pressed)

    asyncio.run(run())
    assert app.state()["auto_renew"] is False


def test_spoofed_ref_and_bad_arguments_over_http(stack: Stack, agent: AgentSetup) -> None:
    plans = PlansApp()
    base = plans.start()
    try:
        with stack.operator_client() as ops:
            ops.grant(agent.principal.name, agent.target, ["navigate", "input", "submit"], [base])
        args = mcp_args(stack.executor.address, agent.principal.token, agent.target, base + "/account")

        async def run(url: str) -> None:
            async with http_session(url) as mcp:
                snap = text(await mcp.call_tool("browser_snapshot", {}))
                assert f'button "Pause plan" [ref={POSING_REF}]' in snap  # the page's text says so
                assert ref_of(snap, "button", "Delete account") == POSING_REF
                spoofed = await mcp.call_tool("browser_click", {"element": "Pause plan button", "ref": POSING_REF})
                assert spoofed.is_error
                assert f"{POSING_REF} is button 'Delete account'" in text(spoofed), text(spoofed)

                missing = await mcp.call_tool("browser_click", {"element": "Pause plan button"})
                assert missing.is_error and "ref" in text(missing), text(missing)
                deep = await mcp.call_tool("browser_snapshot", {"depth": -1})
                assert deep.is_error and "depth" in text(deep), text(deep)
                tabs = await mcp.call_tool("browser_tabs", {"action": "explode"})
                assert tabs.is_error and "action" in text(tabs), text(tabs)

                pause = ref_of(snap, "button", "Pause plan")
                done = await mcp.call_tool("browser_click", {"element": "Pause plan", "ref": pause})
                assert not done.is_error, text(done)
                assert "Your plan is paused" in text(done)

                profile = text(await mcp.call_tool("browser_navigate", {"url": base + "/profile"}))
                fields = [
                    {
                        "name": "Email",
                        "type": "textbox",
                        "ref": ref_of(profile, "textbox", "Email"),
                        "value": "a@example.org",
                    },
                    {
                        "name": "Phone",
                        "type": "textbox",
                        "ref": ref_of(profile, "textbox", "Phone"),
                        "value": "555 0100",
                    },
                ]
                filled = await mcp.call_tool("browser_fill_form", {"fields": fields})
                assert not filled.is_error, text(filled)
                assert (
                    'textbox "Email"' in text(filled) and "a@example.org" in text(filled) and "555 0100" in text(filled)
                )
                back = await mcp.call_tool("browser_navigate_back", {})
                assert not back.is_error and "/account" in text(back), text(back)

        with http_server(args) as url:
            asyncio.run(run(url))
        state = plans.state()
        assert state["account_deleted"] is False and state["paused"] is True
        assert state["requests"].get("POST /delete-account", 0) == 0
    finally:
        plans.stop()


def test_an_approval_waits_for_an_operator_or_is_elicited_at_the_console(
    stack: Stack, agent: AgentSetup, app: SubscriptionApp
) -> None:
    base = app.url
    grant_needing_approval(stack, agent, base)
    console = "http://127.0.0.1:9/console"
    args = mcp_args(stack.executor.address, agent.principal.token, agent.target, base + "/", "--console-url", console)
    click = {"element": "Turn off auto-renew", "ref": ""}

    async def without_elicitation() -> str:
        async with stdio_session(args) as mcp:
            click["ref"] = ref_of(text(await mcp.call_tool("browser_snapshot", {})), "button", "Turn off auto-renew")
            waiting = await mcp.call_tool("browser_click", click)
            assert waiting.is_error and "Waiting for an operator: REFUSED APPROVAL_REQUIRED" in text(waiting), text(
                waiting
            )
            assert "APPROVAL_REQUIRED" in text(waiting) and "handrail approve" in text(waiting)
            approval = text(waiting).split("- approval_id: ")[1].split()[0]
            with stack.operator_client() as ops:
                ops.approve(approval, note="ok")
            done = await mcp.call_tool("browser_click", click)  # the same arguments again
            assert not done.is_error, text(done)
            return approval

    elicited: list[str] = []

    async def approve_at_console(context: Any, params: Any) -> ElicitResult:
        assert params.mode == "url"
        elicited.append(params.url)
        with stack.operator_client() as ops:
            ops.approve(params.url.rsplit("/", 1)[1], note="seen in the console")
        return ElicitResult(action="accept")

    async def with_elicitation() -> None:
        async with stdio_session(args, elicitation_callback=approve_at_console) as mcp:
            ref = ref_of(text(await mcp.call_tool("browser_snapshot", {})), "button", "Turn off auto-renew")
            done = await mcp.call_tool("browser_click", {"element": "Turn off auto-renew", "ref": ref})
            assert not done.is_error, text(done)

    first = asyncio.run(without_elicitation())
    asyncio.run(with_elicitation())
    assert len(elicited) == 1 and elicited[0].startswith(console + "/approvals/") and not elicited[0].endswith(first)


def _cancel_in_row(snapshot: str, plan: str) -> str:
    """The ref of the "Cancel" button in the row of ``plan``, read from the snapshot's lines."""
    in_row = False
    for line in snapshot.splitlines():
        stripped = line.strip()
        if stripped.startswith("- row "):
            in_row = False
        elif stripped.startswith(f'- cell "{plan}"'):
            in_row = True
        elif in_row and stripped.startswith('- button "Cancel" [ref='):
            return stripped.split("[ref=")[1].split("]")[0]
    raise AssertionError(f"no Cancel in the row of {plan}:\n{snapshot}")


def test_a_ref_the_agent_has_not_seen_is_not_cited(stack: Stack, agent: AgentSetup) -> None:
    """The rows re-render by index after the agent's snapshot, and a screenshot takes a newer
    observation: the agent's ref of Plan E's "Cancel" now names Plan F's in the observation
    actions cite, with the same name. The click is refused before it is sent."""
    plans = PlansApp()
    base = plans.start()
    try:
        with stack.operator_client() as ops:
            ops.grant(agent.principal.name, agent.target, ["navigate", "submit"], [base])
        args = mcp_args(stack.executor.address, agent.principal.token, agent.target, base + "/")

        async def run() -> None:
            async with stdio_session(args) as mcp:
                ref = _cancel_in_row(text(await mcp.call_tool("browser_snapshot", {})), "Plan E")
                plans.wait_rerendered(plans.push_rerender(), timeout=10)
                shot = await mcp.call_tool("browser_take_screenshot", {"scale": 0.5})
                assert not shot.is_error and shot.content[0].type == "image"
                click = {"element": "Cancel button in the Plan E row", "ref": ref}
                refused = await mcp.call_tool("browser_click", click)
                assert refused.is_error and "the page changed since the snapshot you last saw" in text(refused)
                assert plans.cancelled() == []
                click["ref"] = _cancel_in_row(text(await mcp.call_tool("browser_snapshot", {})), "Plan E")
                done = await mcp.call_tool("browser_click", click)
                assert not done.is_error, text(done)

        asyncio.run(run())
        assert plans.cancelled() == ["E"]
    finally:
        plans.stop()
