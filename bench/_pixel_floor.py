"""The floor under a guarded pixel click: a gRPC server that takes the guard's steps and
nothing else.

``bench/pixel.py`` bounds a guarded ``click_at`` by a raw ``mouse.click`` plus the guard's
checks, each measured alone. This process measures what those same steps cost when one
server takes them in their order for each call, as the executor must: a ``grpc.aio`` server
on loopback (as the executor's) whose one method, for one click at the point,

1. checks the element at the point with the input guard armed on it (one round trip into
   the page, as the executor's check sends it),
2. asks the sidecar's ``Check`` (the executor's asyncio client),
3. writes the durable intent (a ``Ledger``),
4. sends ``page.mouse.click`` at the point,
5. reads the guard's report,
6. writes the durable result.

Nothing else: no session, observation, network gate, token check or re-observation. Each
step needs the one before it (the decision is judged on the live page's facts; the intent
names the decision; the report follows the input; the result follows the report).

Run by ``pixel.floor_clicks`` as ``python bench/_pixel_floor.py URL AUTHZ TOKEN DATA``;
prints ``READY ADDRESS`` once serving (it clicks the centre of the page's button).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from pathlib import Path
from typing import Any

import grpc

from handrail.authz import AuthzClient
from handrail.authz._async_client import AsyncAuthzClient
from handrail.executor.browser import CHROMIUM_ARGS, chromium_path
from handrail.executor.browser._context import CHECK_ARM_CONTEXT
from handrail.executor.browser._pagescript import DISARM, INIT_SCRIPT, PICK_ENGINE, PICK_SELECTOR, READ_CLOCK
from handrail.executor.browser._pointer import on_picked
from handrail.executor.browser._world import run
from handrail.recorder import Ledger

METHOD = "/bench.PixelFloor/Click"
TARGET = "browser:floor"
AGENT = "bench-agent"


async def with_page_script(page: Any, url: str) -> tuple[str, float]:
    """Load ``url`` (the bench's page) in ``page`` with Handrail's page script: the ref of
    its "Tap" button and the page's clock, as the guard's in-page check takes them."""
    await page.context.add_init_script(INIT_SCRIPT)
    await page.goto(url)
    snapshot = await page.locator("body").aria_snapshot(mode="ai")
    ref = snapshot.split('button "Tap" [ref=')[1].split("]")[0]
    return ref, (await run(page, READ_CLOCK))[1]


async def serve(url: str, authz_address: str, token: str, data: Path) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        await p.selectors.register(PICK_SELECTOR, PICK_ENGINE, content_script=True)
        browser = await p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 800})
        ref, since = await with_page_script(page, url)
        box = await page.locator("button").bounding_box()
        assert box is not None
        x, y = round(box["x"] + box["width"] / 2), round(box["y"] + box["height"] / 2)
        with AuthzClient(authz_address, token) as sync_client:
            epoch = sync_client.acquire(TARGET, holder=AGENT, ttl_ms=3_600_000).epoch
        authz = AsyncAuthzClient(authz_address, token)
        ledger = Ledger(data / "floor-ledger.sqlite")
        params: dict[str, Any] = {"kind": "click", "observation_id": "s:1", "ref": ref, "role": "button", "name": "Tap"}
        calls = [0]

        async def click(_request: bytes, _context: Any) -> bytes:
            calls[0] += 1
            action = f"a{calls[0]}"
            arm = secrets.token_hex(8)
            count, facts = await on_picked(page, ref, CHECK_ARM_CONTEXT, since, [x, y], arm, 7_000, "click")
            if count != 1 or facts is None or facts.get("problem"):
                raise RuntimeError(f"the floor's check refused: {facts}")
            decision = await authz.check(
                AGENT, TARGET, epoch, "submit", url=url, element_role="button", element_name="Tap",
                action_id=action, fingerprint="f" * 64,
            )  # fmt: skip
            if not decision.allow:
                raise RuntimeError(f"the floor's Check refused: {decision.message}")
            ledger.intent("s", action, action, AGENT, epoch, params)
            await page.mouse.click(x, y)
            report = await run(page, DISARM, arm)
            if report.get("changed") or report.get("blocked"):
                raise RuntimeError(f"the floor's guard stopped the click: {report}")
            ledger.result("s", action, action, AGENT, epoch, "DONE", "ALLOW", "DISPATCH_RETURNED", True, "done", {})
            return b""

        server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(click)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.PixelFloor", {"Click": handler}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(f"READY 127.0.0.1:{port}", flush=True)
        await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
