"""Reading a tab for an observation: its snapshot, the moment it was taken, its elements.

One call, the snapshot: ``aria_snapshot(mode="ai")`` of the root SNAP_ENGINE gives
(``handrail-snap=TOKEN``). The engine runs in the snapshot's own task, has the page's world
note that moment (the clock and the mutation count every later check compares with: a
change after it, however soon, is a change) and, once the snapshot has given every node
its ref, measures their boxes; then it pushes the moment, the title and the boxes to the
executor (``_world.pushed``), which hears them before the snapshot's own answer.

A document whose isolated world does not have the push yet (the first reading after each
navigation) pushes nothing: READ_PAGE, in the page's world (``_world.run``: one
``Runtime.evaluate``), collects the same facts beside the snapshot, and the push is
installed for the next reading; a document it still does not reach then (one without
Handrail's script) is read with READ_PAGE beside every snapshot, as before the push. Should
READ_PAGE overtake the snapshot (Playwright sets a new document's isolated world up first),
it says so and is asked again. The push saves that round trip, which costs about as much
CPU (Python, Playwright's driver, the browser, the page) as the snapshot of a small page:
on a busy two-core machine, time.

The element list is parsed from the snapshot (``_ariatree``), with the boxes; a snapshot and
boxes identical to the previous reading's give the previous list back, without parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from handrail.executor._ariatree import KeyCache, parse_snapshot
from handrail.executor._elements import Element
from handrail.executor.browser._aria import strip_boxes, viewport_filter
from handrail.executor.browser._pagescript import READ_CLOCK, READ_PAGE, SNAP_SELECTOR
from handrail.executor.browser._world import install_push, pushed, run

_SNAPSHOT_TIMEOUT_MS = 5_000


@dataclass(frozen=True)
class Reading:
    """What one reading of a tab gave."""

    snapshot: str
    elements: tuple[Element, ...]
    clock: float  # the page's clock when the snapshot was taken
    mutations: int
    title: str


class TabReader:
    """Reads a session's tabs; keeps what makes the next reading of a page cheaper."""

    def __init__(self) -> None:
        self._keys = KeyCache()
        self._last: tuple[str, Any, str, tuple[Element, ...]] = ("", None, "", ())
        # tab id: the document (its tab's navigation count) whose isolated world has the push
        self._pushing: dict[str, int] = {}
        # tab id: the document the push did not reach once installed (a page without
        # Handrail's script, an error page): READ_PAGE goes with each snapshot there
        self._unreached: dict[str, int] = {}
        self._installing: set[asyncio.Future[None]] = set()

    async def read(
        self, page: Page, tab_id: str, *, depth: int, viewport: tuple[int, int] | None, document: int = 0
    ) -> Reading:
        """Snapshot ``page`` (the whole tree, or what intersects ``viewport``) and read it.

        ``document`` names the tab's current document (its navigation count): a new one
        has no push yet, and READ_PAGE is sent with the snapshot.

        Raises:
            PlaywrightError: the page went away or navigated meanwhile.
        """
        # Boxes come with the snapshot itself when only the viewport is asked for.
        token = ("nb" if viewport else "") + secrets.token_hex(8)
        snap = page.locator(f"{SNAP_SELECTOR}={token}").aria_snapshot
        depth_or_all, boxes = depth or None, True if viewport else None
        facts: dict[str, Any]
        if self._pushing.get(tab_id) == document:
            channel = await pushed(page)
            push = channel.expect(token)
            try:
                snapshot = await snap(mode="ai", depth=depth_or_all, boxes=boxes, timeout=_SNAPSHOT_TIMEOUT_MS)
            finally:
                channel.forget(token)
            given = _facts(push.result()) if push.done() else None
            if given is not None:
                facts = given
            else:  # a document the push does not reach (a navigation not yet told, ...)
                del self._pushing[tab_id]
                self._unreached[tab_id] = document
                facts = await run(page, READ_PAGE, token)
        else:
            snapshot, facts = await asyncio.gather(
                snap(mode="ai", depth=depth_or_all, boxes=boxes, timeout=_SNAPSHOT_TIMEOUT_MS),
                run(page, READ_PAGE, token),
            )
            if facts.get("early"):  # asked again now that the snapshot has been taken
                facts = await run(page, READ_PAGE, token)
            if "at" in facts and self._unreached.get(tab_id) != document:
                self._install(page, tab_id, document)
        if "at" not in facts:
            # No Handrail script in this document (an error page): its own clock, now.
            mutations, clock, title = await run(page, READ_CLOCK)
            facts = {"at": clock, "mutations": mutations, "title": title, "boxes": None}
        boxes_raw = facts.get("boxes")
        if viewport:
            kept = viewport_filter(snapshot, *viewport)
            elements = parse_snapshot(kept, tab=tab_id, keys=self._keys)
            snapshot = strip_boxes(kept)
        elif (snapshot, boxes_raw, tab_id) == self._last[:3]:
            elements = self._last[3]
        else:
            elements = parse_snapshot(snapshot, tab=tab_id, boxes=_boxes(boxes_raw), keys=self._keys)
            self._last = (snapshot, boxes_raw, tab_id, elements)
        return Reading(snapshot, elements, float(facts["at"]), int(facts["mutations"]), str(facts["title"]))

    def _install(self, page: Page, tab_id: str, document: int) -> None:
        """Install the push in the document's isolated world, in the background (it is
        there now: the snapshot ran in it); the tab's next reading of it expects the push."""

        async def install() -> None:
            with contextlib.suppress(PlaywrightError):  # the page went meanwhile: READ_PAGE next time
                await install_push(page)
                self._pushing[tab_id] = document

        task = asyncio.ensure_future(install())
        self._installing.add(task)
        task.add_done_callback(self._installed)

    def _installed(self, task: asyncio.Future[None]) -> None:
        self._installing.discard(task)


def _facts(pushed: list[Any]) -> dict[str, Any] | None:
    """READ_PAGE's facts from what SNAP_ENGINE pushed: ``[moment, title, boxes]``, the moment
    being the page's world's ``[clock, mutations]`` as JSON; None if it is not that."""
    if len(pushed) != 3 or not isinstance(pushed[0], str) or not isinstance(pushed[1], str):
        return None
    try:
        moment = json.loads(pushed[0])
    except ValueError:
        return None
    if not isinstance(moment, list) or len(moment) != 2:
        return None
    at, mutations = moment
    if type(at) not in (int, float) or type(mutations) is not int:
        return None
    return {"at": at, "mutations": mutations, "title": pushed[1], "boxes": pushed[2]}


def _boxes(raw: Any) -> dict[str, tuple[int, int, int, int]]:
    """The boxes SNAP_ENGINE measured: a JSON array ``[ref, x, y, width, height, ...]``."""
    if not isinstance(raw, str):
        return {}
    try:
        flat = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(flat, list) or len(flat) % 5:
        return {}
    # They come through the page's world: only well-formed ones are taken.
    numbers = flat[1::5] + flat[2::5] + flat[3::5] + flat[4::5]
    if set(map(type, flat[0::5])) - {str} or set(map(type, numbers)) - {int}:
        return {}
    if numbers and (min(numbers) < -(2**31) or max(numbers) >= 2**31):
        return {}
    return dict(zip(flat[0::5], zip(flat[1::5], flat[2::5], flat[3::5], flat[4::5], strict=True), strict=True))
