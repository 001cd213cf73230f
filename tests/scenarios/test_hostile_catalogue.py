"""The hostile site's catalogue says what its pages do: each way out and each lost response.

The chaos bench and the tests run ``WAYS_OUT`` and ``LOST_RESPONSES`` through Handrail and
through a raw driver; this checks the data against the pages. A raw Playwright page (no
Handrail) leaves on every way marked ``leaves`` and on no other, and a dropped response's
request reaches the server; through Handrail nothing reaches the other origin, and every
way that stays is not refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from handrail.executor import Outcome
from handrail.scenarios import LOST_RESPONSES, WAYS_OUT, HostileSite, hostile_site
from tests.conftest import AgentSetup, Stack

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site() -> Iterator[HostileSite]:
    with hostile_site() as s:
        yield s


def test_the_catalogue_names_each_way_once() -> None:
    assert len({w.name for w in WAYS_OUT}) == len(WAYS_OUT)
    assert {w.how for w in WAYS_OUT} == {"link", "form", "redirect", "script", "refresh", "popup", "socket"}
    assert any(w.leaves for w in WAYS_OUT) and any(not w.leaves for w in WAYS_OUT)
    assert {r.how for r in LOST_RESPONSES} == {"form", "fetch"}


@pytest.mark.slow  # a Chromium of its own
def test_a_raw_driver_leaves_on_every_way_out_and_only_there(site: HostileSite) -> None:
    from playwright.async_api import async_playwright

    from handrail.executor.browser import CHROMIUM_ARGS, chromium_path

    async def run() -> dict[str, int]:
        leaked: dict[str, int] = {}
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            try:
                for way in WAYS_OUT:
                    context = await browser.new_context()
                    page = await context.new_page()
                    site.reset()
                    await page.goto(site.home + way.page)
                    if way.role:
                        await page.get_by_role(way.role, name=way.label, exact=True).click()  # type: ignore[arg-type]
                    deadline = time.monotonic() + 3
                    while way.leaves and not site.leaked() and time.monotonic() < deadline:
                        await asyncio.sleep(0.05)
                    if not way.leaves:
                        await asyncio.sleep(0.5)  # time to leave, were it to
                    leaked[way.name] = site.leaked()
                    await context.close()
                    # A page that left may still send to the other origin as it goes (its
                    # icon, a sub-resource): let that land before the next round's reset.
                    seen, quiet_since = site.leaked(), time.monotonic()
                    while time.monotonic() - quiet_since < 0.3 and time.monotonic() < deadline + 3:
                        await asyncio.sleep(0.05)
                        if site.leaked() != seen:
                            seen, quiet_since = site.leaked(), time.monotonic()
            finally:
                await browser.close()
        return leaked

    leaked = asyncio.run(run())
    assert {name for name, n in leaked.items() if n} == {w.name for w in WAYS_OUT if w.leaves}, leaked


@pytest.mark.slow  # nineteen ways, one by one (test_scope.py covers them in the quick set)
def test_through_handrail_nothing_reaches_the_other_origin(stack: Stack, agent: AgentSetup, site: HostileSite) -> None:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate", "submit", "input"], [site.home])
    session = agent.client.open_session(target=agent.target, start_url=site.home + "/links")
    site.reset()
    for way in WAYS_OUT:
        tabs = session.observe().tabs
        if len(tabs) > 1:  # the pop-up of the previous way
            closed = session.close_tab(tabs[-1].tab_id)
            assert closed.result.outcome is Outcome.DONE, (way.name, closed.result)
        r = session.navigate(site.home + way.page)
        assert r.result.outcome is Outcome.DONE, (way.name, r.result)
        if way.role:
            session.observe()
            r = session.click(session.find(way.role, way.label))
            if not way.leaves:
                assert r.result.outcome is Outcome.DONE, (way.name, r.result)
        time.sleep(0.3)  # a timer, a refresh, a pop-up's load
        assert site.leaked() == 0, (way.name, site.hits("elsewhere"))
    session.close()


def test_a_dropped_response_was_still_received(site: HostileSite) -> None:
    import urllib.error
    import urllib.request

    for lost in LOST_RESPONSES:
        site.reset()
        site.drop(lost.path, 1)
        request = urllib.request.Request(site.home + lost.path, data=b"x=1", method="POST")
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(request, timeout=5)
        assert site.hits("home") == {f"POST {lost.path}": 1}
        assert urllib.request.urlopen(request, timeout=5).status == 200  # the drop was for one
    site.reset()
