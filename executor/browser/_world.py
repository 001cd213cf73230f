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
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

_sessions: weakref.WeakKeyDictionary[Page, asyncio.Future[CDPSession]] = weakref.WeakKeyDictionary()


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
