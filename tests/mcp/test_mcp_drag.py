"""``browser_drag`` over stdio with the SDK's client: both ends cited from the snapshot the
agent saw, a drop target re-rendered since refused with nothing dropped, then done."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import AgentSetup, Stack
from tests.executor.site import serve
from tests.executor.test_drag import DRAG, SWAP
from tests.mcp.client import mcp_args, ref_of, stdio_session, text

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_browser_drag_refuses_a_re_rendered_drop_target_then_drops(stack: Stack, agent: AgentSetup) -> None:
    with serve({"/files": DRAG}) as site:
        with stack.operator_client() as ops:
            ops.grant(agent.principal.name, agent.target, ["navigate", "input"], [site.url])
        args = mcp_args(stack.executor.address, agent.principal.token, agent.target, site.url + "/files")

        async def run() -> None:
            async with stdio_session(args) as mcp:
                snap = text(await mcp.call_tool("browser_snapshot", {}))
                item, archive = ref_of(snap, "button", "Report.pdf"), ref_of(snap, "button", "Archive")
                drag = {"startElement": "Report.pdf", "startRef": item, "endElement": "Archive", "endRef": archive}
                # An end described by another name than its element's: refused before the executor.
                wrong = await mcp.call_tool("browser_drag", {**drag, "endElement": "the bin"})
                assert wrong.is_error and "endElement: " in text(wrong), text(wrong)

                await asyncio.to_thread(site.run_js, SWAP)  # the cited folder says Trash now
                stale = await mcp.call_tool("browser_drag", drag)
                assert stale.is_error and "STALE_REF" in text(stale), text(stale)
                assert "Nothing dropped" in text(await mcp.call_tool("browser_snapshot", {}))

                snap = text(await mcp.call_tool("browser_snapshot", {}))
                drag.update(startRef=ref_of(snap, "button", "Report.pdf"), endRef=ref_of(snap, "button", "Archive"))
                done = await mcp.call_tool("browser_drag", drag)
                assert not done.is_error, text(done)
                assert "Dropped Report.pdf on Archive" in text(done), text(done)

        asyncio.run(run())
