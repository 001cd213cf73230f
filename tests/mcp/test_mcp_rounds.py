"""An approval awaited across ``input_required`` rounds (MCP protocol 2026-07-28), with the
SDK's own ``Client`` over stdio, which negotiates that protocol and drives the rounds."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import StdioServerParameters
from mcp.client.client import Client
from mcp.types import ElicitResult

from handrail.scenarios import SubscriptionApp
from tests.conftest import AgentSetup, Stack, grant_needing_approval
from tests.executor.site import Site, serve
from tests.mcp.client import http_server, mcp_args, ref_of, text

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CONSOLE = "http://127.0.0.1:9/console"
OPERATOR_AFTER_S = 1.0
FORM = """<!doctype html><title>Profile</title><main><h1>Profile</h1>
<form method="post" action="/submit" aria-label="Profile"><label>Nickname <input name="nick"></label></form>
</main>"""


@pytest.fixture
def site() -> Iterator[Site]:
    with serve({"/form": FORM}) as s:
        yield s


def _approve_when_asked(stack: Stack, agent: AgentSetup, after_s: float) -> str:
    """An operator who approves the agent's pending approval ``after_s`` after it appears."""
    deadline = time.monotonic() + 30
    with stack.operator_client() as ops:
        while True:
            pending = ops.list_approvals(status="pending", principal=agent.principal.name)
            if pending:
                time.sleep(after_s)
                ops.approve(pending[0].approval_id, note="seen")
                return pending[0].approval_id
            assert time.monotonic() < deadline, "no approval was asked for"
            time.sleep(0.05)


def _client(args: list[str], asked: list[str]) -> Client:
    async def at_console(context: Any, params: Any) -> ElicitResult:
        asked.append(params.url)
        return ElicitResult(action="accept")

    return Client(StdioServerParameters(command=sys.executable, args=args), elicitation_callback=at_console)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_client_of_the_sessionless_protocol_keeps_one_session(
    stack: Stack, agent: AgentSetup, app: SubscriptionApp, transport: str
) -> None:
    """Protocol 2026-07-28 has no MCP sessions (the SDK builds a connection per request):
    the calls of one stdio client, and every call over HTTP, still act in one Handrail
    session, so a click cites the snapshot the same client took."""
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate", "input", "submit"], [app.url])
    args = mcp_args(stack.executor.address, agent.principal.token, agent.target, app.url + "/")

    async def run(client: Client) -> None:
        async with client:
            assert client.protocol_version >= "2026-07-28"
            sessions = {text(await client.call_tool("handrail_lease_status", {})).split()[2] for _ in range(2)}
            assert len(sessions) == 1, sessions
            ref = ref_of(text(await client.call_tool("browser_snapshot", {})), "button", "Pause plan")
            done = await client.call_tool("browser_click", {"element": "Pause plan", "ref": ref})
            assert not done.is_error, text(done)

    if transport == "stdio":
        asyncio.run(run(Client(StdioServerParameters(command=sys.executable, args=args))))
    else:
        with http_server(args) as url:
            asyncio.run(run(Client(url)))
    assert app.state()["paused"] is True


@pytest.mark.parametrize("console", [False, True], ids=["no-console", "console"])
def test_an_approval_is_awaited_across_rounds_of_one_tool_call(
    stack: Stack, agent: AgentSetup, app: SubscriptionApp, console: bool
) -> None:
    """The click needs an approval: the tool call answers ``input_required`` (asking the user
    to open the console's approval page when one is configured), the client retries, and the
    call completes once the operator approves, one call for the agent."""
    grant_needing_approval(stack, agent, app.url)
    extra = ["--console-url", CONSOLE] if console else []
    args = mcp_args(stack.executor.address, agent.principal.token, agent.target, app.url + "/", *extra)
    asked: list[str] = []

    async def run() -> str:
        async with _client(args, asked) as client:
            assert client.protocol_version >= "2026-07-28"
            ref = ref_of(text(await client.call_tool("browser_snapshot", {})), "button", "Turn off auto-renew")
            operator = asyncio.ensure_future(asyncio.to_thread(_approve_when_asked, stack, agent, OPERATOR_AFTER_S))
            started = time.monotonic()
            done = await client.call_tool("browser_click", {"element": "Turn off auto-renew", "ref": ref})
            assert not done.is_error, text(done)
            assert time.monotonic() - started >= OPERATOR_AFTER_S
            assert "browser_click: button 'Turn off auto-renew'" in text(done)
            return await operator

    approval = asyncio.run(run())
    assert asked == ([f"{CONSOLE}/approvals/{approval}"] if console else [])


def test_a_round_does_not_repeat_what_an_earlier_round_did(stack: Stack, agent: AgentSetup, site: Site) -> None:
    """``browser_type`` with ``submit``: the typing (an input) goes out in the first round, the
    Enter (a submit) awaits the approval. The rounds after it do not type again."""
    grant_needing_approval(stack, agent, site.url)
    args = mcp_args(stack.executor.address, agent.principal.token, agent.target, site.url + "/form")

    async def run() -> None:
        async with _client(args, []) as client:
            ref = ref_of(text(await client.call_tool("browser_snapshot", {})), "textbox", "Nickname")
            operator = asyncio.ensure_future(asyncio.to_thread(_approve_when_asked, stack, agent, 0.5))
            call = {"element": "Nickname", "ref": ref, "text": "ada", "slowly": True, "submit": True}
            done = await client.call_tool("browser_type", call)
            assert not done.is_error, text(done)
            await operator

    asyncio.run(run())
    assert [p["nick"] for p in site.posts] == [["ada"]]
