"""Handrail's page scripts, run in a tab's main world over a CDP session of the tab's own.

``page.evaluate`` wraps every call in Playwright's utility script (arguments and results
serialized as handles may need, a stack trace captured per call in Python): for a page
script that takes JSON and answers JSON, that is most of the cost of the call, in Python,
in Playwright's driver and in the page — about a millisecond of CPU on a busy two-core
machine, as much as the snapshot of a small page. ``run`` sends ``(script)(arg)`` as one
``Runtime.evaluate`` in the tab's main world instead, the world ``page.evaluate`` uses:
the same script, the same answer, the same errors (a ``PlaywrightError`` when the page
threw, navigated meanwhile or went away).

One CDP session per tab, opened when the tab's gate goes in place (or on its first script)
and closed with the tab. The gate listens on it for the requests the page makes (see
``_gate``): the renderer sends those events before the answer to a script that runs after
them, so an input's report arrives after every request its handlers made was announced.

The same session hears what the observation's snapshot engine pushes (``pushed``): a CDP
binding installed in Playwright's isolated world of the tab's documents only, which the
page's own scripts cannot reach. Without ``Runtime.enable`` a binding reaches only the
worlds that exist when it is added, so it is added again for each new document
(``install_push``, when a reading found it missing).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from handrail.executor.browser._pagescript import FACTS_BINDING

_sessions: weakref.WeakKeyDictionary[Page, asyncio.Future[CDPSession]] = weakref.WeakKeyDictionary()
_pushes: weakref.WeakKeyDictionary[CDPSession, Pushed] = weakref.WeakKeyDictionary()
# What Playwright (1.65) names its isolated world in a Chromium page; tests/executor pin it.
_UTILITY_WORLD = "__playwright_utility_world_{guid}"
_MAX_PUSH = 64 * 1024 * 1024


async def session_of(page: Page) -> CDPSession:
    """The tab's own CDP session, the one ``run`` sends its scripts on."""
    opening = _sessions.get(page)
    if opening is not None and opening.done() and not opening.cancelled() and opening.exception() is None:
        return opening.result()
    if opening is None or opening.done():  # none yet, or the last attempt failed
        opening = _sessions[page] = asyncio.ensure_future(page.context.new_cdp_session(page))
    return await asyncio.shield(opening)


async def run(page: Page, script: str, arg: Any = None) -> Any:
    """``page.evaluate(script, arg)`` for a page script of JSON in and JSON out.

    ``script`` is a function expression (it may be async); ``arg`` is JSON-serializable.

    Raises:
        PlaywrightError: the script threw, the page navigated while it ran (its message
            says the context was destroyed), or the page is gone.
    """
    session = await session_of(page)
    expression = f"({script})({json.dumps(arg)})"
    answer = await session.send(
        "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
    )
    details = answer.get("exceptionDetails")
    if details is not None:
        exception = details.get("exception") or {}
        raise PlaywrightError(str(exception.get("description") or details.get("text") or "the page script threw"))
    return answer.get("result", {}).get("value")


class Pushed:
    """What a tab's snapshot engine pushed through FACTS_BINDING, by the snapshot's token.

    Only an awaited token's push is kept; any other is dropped unread.
    """

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[list[Any]]] = {}

    def expect(self, token: str) -> asyncio.Future[list[Any]]:
        """The push of the snapshot of ``token``, once it comes (``forget`` it after)."""
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        return future

    def forget(self, token: str) -> None:
        self._waiting.pop(token, None)

    def on_called(self, event: dict[str, Any]) -> None:
        payload = event.get("payload")
        if event.get("name") != FACTS_BINDING or not isinstance(payload, str) or len(payload) > _MAX_PUSH:
            return
        try:
            pushed = json.loads(payload)
        except ValueError:
            return
        if not isinstance(pushed, list) or not pushed or not isinstance(pushed[0], str):
            return
        future = self._waiting.pop(pushed[0], None)
        if future is not None and not future.done():
            future.set_result(pushed[1:])


async def pushed(page: Page) -> Pushed:
    """The pushes of the tab's snapshot engine (listened to on its session from now on)."""
    session = await session_of(page)
    channel = _pushes.get(session)
    if channel is None:
        channel = _pushes[session] = Pushed()
        session.on("Runtime.bindingCalled", channel.on_called)
    return channel


async def install_push(page: Page) -> None:
    """Add FACTS_BINDING to the tab's current isolated world (Playwright's, not the page's).

    Raises:
        PlaywrightError: the page went away meanwhile.
    """
    session = await session_of(page)
    guid = getattr(getattr(page, "_impl_obj", None), "_guid", "")
    if not guid:  # another Playwright: no push, every reading asks (READ_PAGE)
        return
    world = _UTILITY_WORLD.format(guid=guid)
    await session.send("Runtime.addBinding", {"name": FACTS_BINDING, "executionContextName": world})
