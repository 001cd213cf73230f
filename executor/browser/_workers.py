"""A dedicated worker of a tab, as the network gate attaches to it (see ``_gate``).

Playwright's API gives no CDP session for a worker, so a session of its parent (the tab's,
or a cross-site frame's) attaches to it in the protocol's non-flat mode: commands go as
``Target.sendMessageToTarget`` and answers come back as that session's events.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from handrail.executor._models import ActionKind, ActionSpec
from handrail.executor.browser._pagescript import READ_WORKERS
from handrail.executor.browser._world import run

_NEXT_TASK = "new Promise(function (resolve) { setTimeout(resolve, 0); })"

# Inputs that run the page's handlers with no guard armed, so no report says how many
# workers they made: the dispatch counts the page's workers around them instead (a key with
# no ref goes to the page itself; with one it is armed).
_UNARMED = frozenset({ActionKind.SELECT, ActionKind.UPLOAD, ActionKind.SCROLL})
_KEYS = frozenset({ActionKind.PRESS, ActionKind.HOTKEY})


def counts_workers(spec: ActionSpec) -> bool:
    """Whether the dispatch of ``spec`` counts the page's workers before and after it."""
    return spec.kind in _UNARMED or (spec.kind in _KEYS and not spec.ref)


async def workers_now(page: Page) -> int | None:
    """How many dedicated workers the page's document has made (its init script's count,
    same-origin frames included); None when it cannot say (no script, a closed page)."""
    try:
        count = await run(page, READ_WORKERS)
    except PlaywrightError:
        return None
    return count if type(count) is int and 0 <= count < 2**31 else None


def made_between(before: int | None, after: int | None) -> int:
    """The workers made between two counts; 0 unless both are known and the second is a
    sane number above the first (the page can add to the count, never take from it)."""
    if before is None or after is None:
        return 0
    made = after - before
    return made if 0 < made < 1_000 else 0


class Worker:
    """A dedicated worker a session (``via``: its tab's, or its frame's) attached to in
    non-flat mode: commands go as ``Target.sendMessageToTarget``, answers come back as
    events of ``via``."""

    def __init__(self, page: Page, via: CDPSession, session: str) -> None:
        self.page, self.session, self.via = page, session, via
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self.running = asyncio.Event()  # set once it announces and was let run
        self.ordinal = 0  # how many of its tab's workers had attached, it included

    async def send(self, method: str, params: dict[str, Any]) -> None:
        await self._post(next(self._ids), method, params)

    async def next_task(self) -> None:
        """Once the worker has run one task of its own."""
        await self.running.wait()  # sent to a paused worker, it would run before its script
        # Waited for before it is sent: its answer may come before the send's own reply.
        number = next(self._ids)
        answer = self._waiting[number] = asyncio.get_running_loop().create_future()
        try:
            await self._post(
                number, "Runtime.evaluate", {"expression": _NEXT_TASK, "awaitPromise": True, "silent": True}
            )
            await answer
        except PlaywrightError:
            return  # the worker is gone: it makes no more requests
        finally:
            self._waiting.pop(number, None)

    async def _post(self, number: int, method: str, params: dict[str, Any]) -> None:
        message = json.dumps({"id": number, "method": method, "params": params})
        await self.via.send("Target.sendMessageToTarget", {"sessionId": self.session, "message": message})

    def answered(self, message: dict[str, Any]) -> None:
        answer = self._waiting.pop(message.get("id", -1), None)
        if answer is not None and not answer.done():
            answer.set_result(None)

    def gone(self) -> None:
        self.running.set()
        for answer in self._waiting.values():
            if not answer.done():
                answer.set_result(None)
        self._waiting.clear()
