"""The executor's own guarded click: when it runs, when Playwright's runs, what it refuses."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handrail.executor import ExecutorClient, Outcome, Session
from handrail.executor.browser import BrowserHost
from handrail.executor.browser._pagescript import ARM_POINTER, DISARM, PICK_SELECTOR, READ_CLOCK
from handrail.recorder import Ledger
from handrail.scenarios import start_executor
from tests.conftest import AgentSetup, Stack
from tests.executor.site import Site, serve

pytestmark = pytest.mark.browser


def _form(name: str, style: str = "") -> str:
    return (
        f'<form method="post" action="/submit"><input type="hidden" name="page" value="{name}">'
        f'<button id="{name}" style="{style}">{name.title()}</button></form>'
    )


POINTER = (
    "<!doctype html><title>Pointer</title><main><h1>Pointer</h1>"
    + _form("near")
    + _form("spin")
    + '<p><a href="/thanks">Read the thanks</a> <a href="#later">Skip ahead</a></p>'
    + "<p id=\"status\">idle</p><button onclick=\"document.getElementById('status').textContent = 'poked'\">Poke</button>"
    + "<fieldset disabled><legend>Closed</legend><button onclick=\"document.getElementById('status')"
    + ".textContent = 'fenced'\">Fenced</button></fieldset>"
    + '<div aria-disabled="true"><button onclick="document.getElementById(\'status\')'
    + ".textContent = 'greyed'\">Greyed</button></div>"
    + '<div style="height: 3000px"></div>'
    + _form("far")
    + "</main>"
)
DONE = "<!doctype html><title>Thanks</title><main><h1>Thank you</h1></main>"
# Buttons whose handler submits a form by script: no submit event, no navigate event
# while the click is handled; the navigation is only planned, in a task of its own.
PROGRAMMATIC = (
    "<!doctype html><title>Programmatic</title><main><h1>Programmatic</h1>"
    '<form id="p" method="post" action="/submit"><input type="hidden" name="page" value="script"></form>'
    "<button onclick=\"document.getElementById('p').submit()\">Send by script</button>"
    '<form id="g" action="/thanks"></form>'
    "<button onclick=\"document.getElementById('g').submit()\">Read by script</button></main>"
)


@pytest.fixture
def site() -> Iterator[Site]:
    with serve({"/pointer": POINTER, "/thanks": DONE, "/programmatic": PROGRAMMATIC}) as s:
        yield s


def _session(
    stack: Stack, agent: AgentSetup, site: Site, client: ExecutorClient | None = None, page: str = "/pointer"
) -> Session:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["submit", "navigate"], [site.url])
    session = (client or agent.client).open_session(target=agent.target, start_url=site.url + page)
    session.observe()
    return session


def _via(stack: Stack, session: Session) -> list[str]:
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        results = ledger.entries(session_id=session.session_id, kind="result")
        return [str(e.body.get("extra", {}).get("via", "")) for e in results]


def test_a_click_in_view_goes_out_guarded_and_the_rest_through_playwright(
    stack: Stack, agent: AgentSetup, site: Site
) -> None:
    session = _session(stack, agent, site)
    r = session.click(session.find("button", "Near"))
    assert r.result.outcome is Outcome.DONE, r.result
    assert r.observation is not None and "Thank you" in r.observation.snapshot  # waited for the post
    # Below the fold: Playwright scrolls it into view and clicks it.
    session.navigate(site.url + "/pointer")
    r = session.click(session.find("button", "Far"))
    assert r.result.outcome is Outcome.DONE, r.result
    # Moving (an animation the DOM does not show): Playwright waits until it holds still.
    session.navigate(site.url + "/pointer")
    session.observe()
    site.run_js(
        "document.getElementById('spin').animate("
        "[{transform: 'translateX(0)'}, {transform: 'translateX(40px)'}], {duration: 700});"
    )
    r = session.click(session.find("button", "Spin"))
    assert r.result.outcome is Outcome.DONE, r.result
    # A click that starts no navigation reports at once, with the page's change seen.
    session.navigate(site.url + "/pointer")
    r = session.click(session.find("button", "Poke"))
    assert r.result.outcome is Outcome.DONE, r.result
    assert r.observation is not None and "poked" in r.observation.snapshot
    assert [p["page"] for p in site.posts] == [["near"], ["far"], ["spin"]]
    assert _via(stack, session) == ["pointer", "", "playwright", "", "playwright", "", "pointer"]


@pytest.mark.slow
def test_a_change_between_check_and_dispatch_stops_the_click(
    stack: Stack, agent: AgentSetup, site: Site, tmp_path: Path
) -> None:
    # An executor that pauses 1.5 s after each intent: the page changes meanwhile.
    slow = start_executor(
        tmp_path, stack.authz.address, stack.executor_principal.token, extra=["--fault", "after-intent:sleep=1500"]
    )
    try:
        with ExecutorClient(slow.address, agent.principal.token) as client:
            session = _session(stack, agent, site, client)
            for change, said in (
                # The guard, armed with the check, sees the new text at the press.
                ("document.getElementById('near').textContent = 'Cancel';", "text or naming attributes changed"),
                (
                    "var d = document.createElement('div'); d.id = 'toast';"
                    "d.style.cssText = 'position:fixed;inset:0;background:#fff';"
                    "document.body.appendChild(d);",
                    "covered by div#toast",
                ),
                # Nothing of its identity changes; it cannot take the press any more.
                ("document.getElementById('near').disabled = true;", "disabled"),
            ):
                ref = session.find("button", "Near")
                box: dict[str, object] = {}
                worker = threading.Thread(target=lambda ref=ref, box=box: box.update(r=session.click(ref)))
                worker.start()
                time.sleep(0.8)  # the intent is durable; the dispatch waits
                site.run_js(change)
                worker.join(30)
                r = box["r"].result  # type: ignore[attr-defined]
                assert (r.outcome, r.reason, r.execution_started) == (Outcome.FAILED, "STALE_REF", False), r
                assert said in r.message, r.message
                session.navigate(site.url + "/pointer")
            assert site.posts == []
    finally:
        slow.stop()


def test_the_guard_swallows_input_that_lands_on_something_else(site: Site) -> None:
    async def run() -> tuple[dict[str, object], str]:
        host = BrowserHost()
        await host.start()
        try:
            surface = await host.open_page(site.url + "/pointer")
            page = surface.active.page
            await page.aria_snapshot(mode="ai")
            since = (await page.evaluate(READ_CLOCK))[1]
            snapshot = await page.aria_snapshot(mode="ai")
            ref = next(line for line in snapshot.splitlines() if '"Poke"' in line).split("[ref=")[1].split("]")[0]
            # The page listens first thing on the window, as analytics and frameworks do.
            await page.evaluate(
                "() => window.addEventListener('pointerdown', () => {"
                " document.getElementById('status').textContent = 'the page saw it'; }, true)"
            )
            count = await page.locator(f"aria-ref={ref} >> {PICK_SELECTOR}=t1").count()
            armed = await page.evaluate(ARM_POINTER, ["t1", since, "arm-1", 5000])
            assert count == 1 and "x" in armed, armed
            # Between the arm and the input, something else comes to lie over the button.
            await page.evaluate(
                "() => { const d = document.createElement('div'); d.id = 'late';"
                " d.style.cssText = 'position:fixed;inset:0';"
                " d.onclick = () => { document.getElementById('status').textContent = 'late got it'; };"
                " document.body.appendChild(d); }"
            )
            await page.mouse.click(armed["x"], armed["y"])
            report = await page.evaluate(DISARM, "arm-1")
            status = await page.evaluate("() => document.getElementById('status').textContent")
            await surface.close()
            return report, status
        finally:
            await host.close()

    report, status = asyncio.run(run())
    assert (report["blocked"], report["changed"], report["navigating"]) == ("div#late", "", False), report
    assert status == "idle"  # neither the overlay, nor the button, nor the page's own listener saw it


def test_a_control_disabled_by_its_fieldset_or_an_ancestor_is_not_clicked(
    stack: Stack, agent: AgentSetup, site: Site
) -> None:
    session = _session(stack, agent, site)
    for name in ("Fenced", "Greyed"):
        r = session.click(session.find("button", name))
        assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "STALE_REF"), r.result
        assert "disabled" in r.result.message
    assert "idle" in session.observe().snapshot


@pytest.mark.slow
def test_an_operator_can_send_every_click_through_playwright(
    stack: Stack, agent: AgentSetup, site: Site, tmp_path: Path
) -> None:
    plain = start_executor(tmp_path, stack.authz.address, stack.executor_principal.token, extra=["--playwright-clicks"])
    try:
        with ExecutorClient(plain.address, agent.principal.token) as client:
            session = _session(stack, agent, site, client)
            r = session.click(session.find("button", "Poke"))
            assert r.result.outcome is Outcome.DONE, r.result
        with Ledger(tmp_path / "ledger.sqlite") as ledger:
            results = ledger.entries(session_id=session.session_id, kind="result")
            assert [e.body["extra"]["via"] for e in results] == ["playwright"]
    finally:
        plain.stop()


def test_a_link_is_followed_and_a_fragment_link_is_not_waited_for(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site)
    r = session.click(session.find("link", "Skip ahead"))
    assert r.result.outcome is Outcome.DONE, r.result
    assert r.observation is not None and r.observation.url.endswith("/pointer#later")
    r = session.click(session.find("link", "Read the thanks"))
    assert r.result.outcome is Outcome.DONE, r.result
    assert r.observation is not None and r.observation.url.endswith("/thanks")
    assert "Thank you" in r.observation.snapshot
    assert _via(stack, session) == ["pointer", "pointer"]


@pytest.mark.parametrize("answer", ["get", "post", "post-dropped"])
def test_a_form_submitted_by_script_in_the_handler_is_waited_for(
    stack: Stack, agent: AgentSetup, site: Site, answer: str
) -> None:
    """The pointer's report comes back before the planned submission runs: the renderer's
    announcement of the navigation it asked for makes the click itself wait for it, also
    with no re-observation (which would wait for the page in its own way). The answer
    takes 0.6 s: DONE once it is in, or UNKNOWN when the server drops the connection."""
    session = _session(stack, agent, site, page="/programmatic")
    site.post_delay_s = site.page_delays["/thanks"] = 0.6
    if answer == "post-dropped":
        site.drop_next_post()
    button = session.find("button", "Read by script" if answer == "get" else "Send by script")
    started = time.monotonic()
    r = session.click(button, skip_reobserve=True)
    took = time.monotonic() - started
    assert len(site.posts) == (0 if answer == "get" else 1)
    assert took >= 0.5, f"the click returned after {took:.3f} s, before the navigation it started ended"
    if answer == "post-dropped":
        assert r.result.outcome is Outcome.UNKNOWN, r.result
    else:
        assert r.result.outcome is Outcome.DONE, r.result
        assert "Thank you" in session.observe().snapshot
    assert _via(stack, session) == ["pointer"]


HEADINGS = (
    "<!doctype html><title>Headings</title><main><h1>Top</h1><section><h2>Plans <button>In</button></h2>"
    "<ul><li><button>One</button></li><li><div role=heading>Row title</div><button>Two</button></li></ul></section>"
    + "".join(f"<p>filler {i}</p>" for i in range(80))
    + "<button>Far</button><div role=HEADING>not a heading</div><button>After</button></main>"
)


def test_the_context_reader_finds_the_heading_the_page_wide_query_finds() -> None:
    """The nearest heading before an element is found walking back from it (a few dozen
    elements, then the page-wide query): the same heading for every element."""
    from handrail.executor.browser._context import READ_CONTEXT

    old = (
        "(el) => { let heading = null;"
        " for (const h of document.querySelectorAll('h1,h2,h3,h4,h5,h6,[role=\"heading\"]')) {"
        " if (h.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) heading = h; else break; }"
        " return heading ? heading.textContent.replace(/\\s+/g, ' ').trim() : ''; }"
    )

    async def run() -> list[list[str]]:
        host = BrowserHost()
        await host.start()
        try:
            with serve({"/h": HEADINGS}) as s:
                surface = await host.open_page(s.url + "/h")
                pairs: list[list[str]] = await surface.active.page.evaluate(
                    "([read, old]) => { const r = eval(read), o = eval(old);"
                    " return [...document.querySelectorAll('main *')].map((el) => [r(el).heading, o(el)]); }",
                    [READ_CONTEXT, old],
                )
                return pairs
        finally:
            await host.close()

    pairs = asyncio.run(run())
    assert len(pairs) > 90 and all(new == old for new, old in pairs), [p for p in pairs if p[0] != p[1]]
    assert {new for new, _ in pairs} >= {"Top", "Plans In", "Row title"}
