"""Reading a tab for an observation: its snapshot, the moment it was taken, its elements.

One round of two calls, sent together:

- the snapshot, ``aria_snapshot(mode="ai")`` of the root SNAP_ENGINE gives
  (``handrail-snap=TOKEN``): the engine runs in the snapshot's own task, tells the page's
  world that moment (the clock and the mutation count every later check compares with:
  a change after it, however soon, is a change) and, once the snapshot has given every
  node its ref, measures their boxes;
- READ_PAGE, in the page's world (``_world.run``: one ``Runtime.evaluate``): that moment,
  the title, the boxes.

Should READ_PAGE overtake the snapshot (Playwright sets a new document's isolated world
up first), it says so and is asked again. The element list is parsed from the snapshot
(``_ariatree``), with the boxes; a snapshot and boxes identical to the previous reading's
give the previous list back, without parsing.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from typing import Any

from playwright.async_api import Page

from handrail.executor._ariatree import KeyCache, parse_snapshot
from handrail.executor._elements import Element
from handrail.executor.browser._aria import strip_boxes, viewport_filter
from handrail.executor.browser._pagescript import READ_CLOCK, READ_PAGE, SNAP_SELECTOR
from handrail.executor.browser._world import run

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

    async def read(self, page: Page, tab_id: str, *, depth: int, viewport: tuple[int, int] | None) -> Reading:
        """Snapshot ``page`` (the whole tree, or what intersects ``viewport``) and read it.

        Raises:
            PlaywrightError: the page went away or navigated meanwhile.
        """
        # Boxes come with the snapshot itself when only the viewport is asked for.
        token = ("nb" if viewport else "") + secrets.token_hex(8)
        snapshot, facts = await asyncio.gather(
            page.locator(f"{SNAP_SELECTOR}={token}").aria_snapshot(
                mode="ai", depth=depth or None, boxes=True if viewport else None, timeout=_SNAPSHOT_TIMEOUT_MS
            ),
            run(page, READ_PAGE, token),
        )
        if facts.get("early"):
            facts = await run(page, READ_PAGE, token)
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
