"""The facts of an observation's snapshot pushed from Playwright's world (``_reading``).

The moment a snapshot was taken (the clock and mutation count every later check compares
with), the title and the boxes reach the executor through a CDP binding that only
Playwright's isolated world has; READ_PAGE asks for them where the push is not in place
(the first reading of each document). Both give the same facts, and the page's own
scripts can neither see the hand-over nor call the binding.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from handrail.executor.browser import BrowserHost, _reading, _world
from handrail.executor.browser._pagescript import FACTS_BINDING, READ_PAGE, SNAP_EVENT, SNAP_FACTS
from handrail.executor.browser._reading import Reading, TabReader
from handrail.executor.browser._world import run
from tests.executor.site import Site, serve

pytestmark = pytest.mark.browser

# The page listens for every hand-over event name, first thing, as a hostile page would.
_SPY = (
    "<script>window.seen = [];"
    + "".join(
        f"window.addEventListener('{name}', (e) => window.seen.push(e.type), true);"
        f"document.addEventListener('{name}', (e) => window.seen.push(e.type), true);"
        for name in (SNAP_EVENT, SNAP_FACTS)
    )
    + "</script>"
)
FIRST = (
    "<!doctype html><title>First</title>" + _SPY + "<main><h1>First</h1><p id=n>0</p>"
    "<button onclick=\"document.getElementById('n').textContent++\">Tap</button>"
    '<a href="/second">On</a></main>'
)
SECOND = "<!doctype html><title>Second</title>" + _SPY + "<main><h1>Second</h1><button>Other</button></main>"


@pytest.fixture
def site() -> Iterator[Site]:
    with serve({"/first": FIRST, "/second": SECOND}) as s:
        yield s


class _Counted:
    """``_reading.run`` counting READ_PAGE calls."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, page: Any, script: str, arg: Any = None) -> Any:
        if script == READ_PAGE:
            self.asked += 1
        return await run(page, script, arg)


async def _settled(reader: TabReader) -> None:
    # The push is installed in the background after a reading that asked.
    for _ in range(200):
        if not reader._installing:
            return
        await asyncio.sleep(0.01)


def test_the_push_replaces_read_page_after_the_first_reading_and_gives_the_same_facts(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = _Counted()
    monkeypatch.setattr(_reading, "run", counted)

    async def go() -> tuple[list[Reading], list[int], list[Any], Any]:
        host = BrowserHost()
        await host.start()
        try:
            surface = await host.open_page(site.url + "/first")
            tab = surface.active
            page = tab.page
            reader = TabReader()
            readings, asked = [], []

            async def read() -> None:
                readings.append(await reader.read(page, tab.tab_id, depth=0, viewport=None, document=tab.navigations))
                asked.append(counted.asked)
                await _settled(reader)

            await read()  # asks: the document has no push yet
            await read()  # pushed
            await page.click("button")  # a mutation, counted by the page's world
            await read()
            clock = await page.evaluate("() => window.__handrail.clock()")
            await page.click("a")
            await page.wait_for_url("**/second")
            await read()  # a new document: asks again
            await read()  # pushed
            seen = await page.evaluate("() => window.seen")
            binding = await page.evaluate(f"() => typeof window.{FACTS_BINDING}")
            return readings, asked, [clock, seen], binding
        finally:
            await host.close()

    readings, asked, (clock, seen), binding = asyncio.run(go())
    # READ_PAGE only on each document's first reading (asked twice there when it overtook
    # the snapshot, as on a fresh document it does).
    news = [b - a for a, b in zip([0, *asked], asked, strict=False)]
    assert news[0] > 0 and news[3] > 0 and news[1] == news[2] == news[4] == 0, asked
    first, second, third, fourth, fifth = readings
    assert (first.title, second.title, third.title, fourth.title, fifth.title) == (
        "First",
        "First",
        "First",
        "Second",
        "Second",
    )
    assert first.clock < second.clock < third.clock < fourth.clock < fifth.clock
    # The tap's mutation counted, at the moment of the third snapshot, as the page's world counts.
    assert second.mutations == first.mutations and third.mutations > second.mutations
    assert third.mutations == clock[0]
    # Boxes came with the pushed readings as with the asked ones.
    assert [e.box for e in second.elements] == [e.box for e in first.elements]
    assert all(e.box is not None for e in second.elements + fifth.elements if e.role == "button")
    assert [e.name for e in fifth.elements if e.role == "button"] == ["Other"]
    # Nothing of the hand-over reached the page's own listeners, nor the binding its world.
    assert seen == [] and binding == "undefined"


def test_a_page_that_fires_the_hand_over_events_itself_changes_no_reading(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page that dispatches the snapshot's hand-over events (names are public) with facts
    of its own: the readings keep the page's world's real moment."""
    counted = _Counted()
    monkeypatch.setattr(_reading, "run", counted)
    forge = (
        "() => { const pipe = document.createElement('span'); pipe.id = 'x';"
        f" document.body.dispatchEvent(new FocusEvent('{SNAP_EVENT}', {{ relatedTarget: pipe, bubbles: true }}));"
        f" document.dispatchEvent(new CustomEvent('{SNAP_FACTS}', {{ detail: JSON.stringify([1e15, 0]) }}));"
        f" document.body.dispatchEvent(new CustomEvent('{SNAP_EVENT}', {{ detail: 'x', bubbles: true }})); }}"
    )

    async def go() -> list[Reading]:
        host = BrowserHost()
        await host.start()
        try:
            surface = await host.open_page(site.url + "/first")
            tab = surface.active
            reader = TabReader()
            readings = []
            for _ in range(3):
                await tab.page.evaluate(forge)
                readings.append(
                    await reader.read(tab.page, tab.tab_id, depth=0, viewport=None, document=tab.navigations)
                )
                await _settled(reader)
            return readings
        finally:
            await host.close()

    readings = asyncio.run(go())
    assert 0 < counted.asked <= 2  # the first reading only
    assert all(r.clock < 1e14 for r in readings)
    assert readings[0].clock < readings[1].clock < readings[2].clock


def test_a_document_the_push_does_not_reach_is_read_with_read_page_beside_each_snapshot(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the installed push never comes (here: installed in a world of another name),
    one reading waits for it in vain and the rest ask READ_PAGE beside the snapshot, with
    no further install."""
    counted = _Counted()
    monkeypatch.setattr(_reading, "run", counted)
    monkeypatch.setattr(_world, "_UTILITY_WORLD", "no-such-world-{guid}")
    installs: list[object] = []

    async def install(page: object) -> None:
        installs.append(page)
        await _world.install_push(page)  # type: ignore[arg-type]

    monkeypatch.setattr(_reading, "install_push", install)

    async def go() -> list[Reading]:
        host = BrowserHost()
        await host.start()
        try:
            surface = await host.open_page(site.url + "/first")
            tab = surface.active
            reader = TabReader()
            readings = []
            for _ in range(4):
                readings.append(
                    await reader.read(tab.page, tab.tab_id, depth=0, viewport=None, document=tab.navigations)
                )
                await _settled(reader)
            return readings
        finally:
            await host.close()

    readings = asyncio.run(go())
    assert all(r.title == "First" and r.elements[0].box is not None for r in readings)
    assert readings[0].clock < readings[1].clock < readings[2].clock < readings[3].clock
    assert 4 <= counted.asked <= 5  # one each (and one more when the first came early)
    assert len(installs) == 1  # waited for in vain once, not at every other reading
