"""A request belongs to the action running when the page made it, however late it is reported.

Playwright's routing hands the executor a side-effecting request only when its driver gets
to it: on a busy machine, after the click that made it has been reported ``DONE`` and the
session closed (CI saw a ``fetch`` POST lost that way). These tests make that delay long
and certain: a route the test adds in front of the executor's holds each request to
``/submit`` for a while before passing it on. The executor, in process on a real sidecar,
a real ledger and a real Chromium, must still wait for the request the click made, and
must not hold a request the page made between actions against the action that happens to
be running when it is reported.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Route

from handrail.authz import AsyncAuthzClient
from handrail.executor import ActionKind, ActionResult, ActionSpec, Outcome, Reason
from handrail.executor._backend import Backend
from handrail.executor._guard import GuardedExecutor, OpenSpec
from handrail.executor._models import BackendKind
from handrail.executor.browser import BrowserHost, BrowserSurface
from handrail.recorder import Ledger, ResultBody
from tests.executor.inproc import Sidecar
from tests.executor.site import Site, serve

pytestmark = pytest.mark.browser

HELD_S = 1.5  # how long the test's route holds a request before the executor hears of it

PAY = (
    "<!doctype html><title>Pay</title><main><h1>Pay</h1>"
    "<p id=status>idle</p>"
    "<button onclick=\"fetch('/submit', {method: 'POST', body: 'page=pay'}).then(function () {"
    "document.getElementById('status').textContent = 'paid'; })\">Pay</button>"
    "<button onclick=\"setTimeout(function () { window.slow = fetch('/submit', "
    "{method: 'POST', body: 'page=later'}); }, 0)\">Later</button>"
    "<button onclick=\"document.getElementById('status').textContent = 'poked'\">Poke</button>"
    "</main>"
)


# A payment widget in an iframe; on another site (``localhost`` in a page of 127.0.0.1) it
# runs in a renderer of its own, whose requests the tab's own session never sees.
WIDGET = (
    "<!doctype html><title>Widget</title><p id=status>idle</p>"
    "<button onclick=\"fetch('/submit', {method: 'POST', body: 'page=widget'}).then(function () {"
    "document.getElementById('status').textContent = 'paid'; })\">Pay in widget</button>"
)


# A page that hands the order to its dedicated Worker (a target of its own, like the widget).
_WORKER = "fetch(location.origin + '/submit', {method: 'POST', body: 'page=worker'}).then(function () { postMessage('ok'); });"
WORKERS = (
    "<!doctype html><title>Workers</title><main><h1>Workers</h1><p id=status>idle</p>"
    f"<script type=text/worker id=running>onmessage = function () {{ {_WORKER} }};</script>"
    "<script>function worker(id) { var w = new Worker(URL.createObjectURL(new Blob(["
    "document.getElementById(id).textContent]))); w.onmessage = function () {"
    " document.getElementById('status').textContent = 'paid'; }; return w; }"
    "var running = worker('running');</script>"
    "<button onclick=\"running.postMessage('pay')\">Pay by the worker</button>"
    "<button onclick=\"worker('running').postMessage('pay')\">Pay by a new worker</button>"
    "<button onclick=\"var w = new Worker('/pay-worker.js'); w.postMessage('pay')\">Pay by a fetched worker</button>"
    # inputs the guard is not armed for: a choice, and a key pressed on the page itself
    "<select aria-label=Plan onchange=\"worker('running').postMessage('pay')\"><option>basic</option><option>pro</option></select>"
    "<script>document.addEventListener('keydown', function (e) {"
    " if (e.key === 'F9') worker('running').postMessage('pay'); });</script>"
    "</main>"
)
# A payment widget (on another site, in an iframe of /shop-worker-localhost) that hands the
# order to a dedicated worker of its own: a target of the widget's renderer, not the tab's.
WIDGET_WORKER = (
    "<!doctype html><title>Widget</title><p id=status>idle</p>"
    f"<script type=text/worker id=running>onmessage = function () {{ {_WORKER} }};</script>"
    "<script>var running = new Worker(URL.createObjectURL(new Blob(["
    "document.getElementById('running').textContent])));</script>"
    "<button onclick=\"running.postMessage('pay')\">Pay by the widget's worker</button>"
)
# A page that hands the order to a SharedWorker when it has one, and sends it itself if not.
_SHARED = (
    "onconnect = function (e) { var port = e.ports[0]; port.onmessage = function () { "
    + _WORKER.replace("postMessage", "port.postMessage")
    + " }; };"
)
SHARED = (
    "<!doctype html><title>Shared</title><main><h1>Shared</h1><p id=status>idle</p>"
    f"<script type=text/worker id=shared>{_SHARED}</script>"
    "<script>var shared = window.SharedWorker && new SharedWorker(URL.createObjectURL(new Blob(["
    "document.getElementById('shared').textContent])));"
    "function pay() { if (shared) { shared.port.postMessage('pay'); return; }"
    " fetch('/submit', {method: 'POST', body: 'page=worker'}); }</script>"
    '<button onclick="pay()">Pay</button></main>'
)


@pytest.fixture
def site() -> Iterator[Site]:
    pages = {"/pay": PAY, "/widget": WIDGET, "/widget-worker": WIDGET_WORKER, "/workers": WORKERS, "/shared": SHARED}
    pages["/pay-worker.js"] = f"onmessage = function () {{ {_WORKER} }};"
    with serve(pages) as s:
        port = s.url.rsplit(":", 1)[1]
        for host in ("localhost", "127.0.0.1"):
            for prefix, widget in (("", "widget"), ("worker-", "widget-worker")):
                pages[f"/shop-{prefix}{host}"] = (
                    "<!doctype html><title>Shop</title><main><h1>Shop</h1>"
                    f"<iframe title=Payment src='http://{host}:{port}/{widget}'></iframe></main>"
                )
        yield s


async def _hold(route: Route) -> None:
    await asyncio.sleep(HELD_S)
    await route.fallback()  # on to the executor's own routing, late


class Rig:
    """An executor core with a real browser, one session open on the site's /pay page."""

    def __init__(self, sidecar: Sidecar, site: Site, ledger: Path, start: str = "/pay", **scope: object) -> None:
        self.sidecar, self.site, self.ledger_path, self.scope = sidecar, site, ledger, scope
        self.start = start
        self.surfaces: list[BrowserSurface] = []

    async def __aenter__(self) -> Rig:
        self.host = BrowserHost()
        await self.host.start()
        name, self.token = self.sidecar.add_agent()
        target = f"browser:{name}"
        async with AsyncAuthzClient(self.sidecar.address, self.sidecar.operator_token) as ops:
            # The widget's site (localhost) is granted too: an action in a frame is judged
            # on the frame's origin.
            origins = [self.site.url, self.site.url.replace("127.0.0.1", "localhost")]
            await ops.grant(name, target, ["input", "submit", "navigate"], origins, **self.scope)
        self.authz = AsyncAuthzClient(self.sidecar.address, self.sidecar.executor_token)
        self.ledger = Ledger(self.ledger_path)

        async def open_backend(spec: OpenSpec) -> Backend:
            surface = await self.host.open_page()
            self.surfaces.append(surface)
            return surface

        self.core = GuardedExecutor(self.authz, self.ledger, open_backend)
        await self.core.start()
        spec = OpenSpec(BackendKind.BROWSER, target, self.site.url + self.start)
        info = await self.core.open_session(token=self.token, agent="", target=target, spec=spec)
        self.session = self.core.sessions.get(info.session_id, self.token)
        await self.surfaces[0].active.page.context.route("**/submit", _hold)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.core.close()
        await self.authz.close()
        self.ledger.close()
        await self.host.close()

    async def click(self, name: str, key: str, *, skip_reobserve: bool = False) -> tuple[Outcome, str, float]:
        """Click the button ``name``: its outcome, its message, and how long it took."""
        result, took = await self.clicked(name, key, skip_reobserve=skip_reobserve)
        return result.outcome, result.message, took

    async def clicked(self, name: str, key: str, *, skip_reobserve: bool = False) -> tuple[ActionResult, float]:
        """Observe, then click the button ``name``: its result and how long the click took."""
        return await self.acted(ActionKind.CLICK, key, ("button", name), skip_reobserve=skip_reobserve)

    async def acted(
        self, kind: ActionKind, idempotency_key: str, element: tuple[str, str] | None, **fields: Any
    ) -> tuple[ActionResult, float]:
        """Observe, then act on the element of that (role, name) (None: on the page): the
        result and how long the action took."""
        await self.surfaces[0].active.page.wait_for_load_state("load")  # an iframe's too
        obs = await self.core.observe(self.session)
        ref = ""
        if element is not None:
            ref = next(e.ref for e in obs.elements if (e.role, e.name) == element)
        spec = ActionSpec(
            kind=kind, ref=ref, observation_id=obs.observation_id, idempotency_key=idempotency_key, **fields
        )
        started = time.monotonic()
        result = (await self.core.act(self.session, spec)).result
        return result, time.monotonic() - started


# Where a page makes its order: (start page, button, what the order's body says).
_PAGE = pytest.param("/pay", "Pay", "pay", id="page")
_CROSS_SITE = pytest.param("/shop-localhost", "Pay in widget", "widget", id="cross-site-iframe")
_WORKER_CASE = pytest.param("/workers", "Pay by the worker", "worker", id="worker")
_WIDGET_WORKER = pytest.param(
    "/shop-worker-localhost", "Pay by the widget's worker", "worker", id="cross-site-iframes-worker"
)


@pytest.mark.parametrize(
    ("start", "button", "posted"),
    [
        _PAGE,
        pytest.param("/shop-127.0.0.1", "Pay in widget", "widget", id="same-site-iframe"),
        _CROSS_SITE,
        _WORKER_CASE,
        _WIDGET_WORKER,
        pytest.param("/shared", "Pay", "worker", id="no-shared-worker"),
    ],
)
def test_a_click_waits_for_the_request_it_made_however_late_it_is_reported(
    sidecar: Sidecar, site: Site, tmp_path: Path, start: str, button: str, posted: str
) -> None:
    """The click's order reaches the executor's routing 1.5 s after the click: the click is
    ``DONE`` only once the order is at the server and answered, and the order carries the
    click's ``Idempotency-Key`` — wherever the page made it:

    - the page itself, or a same-site iframe (the page's renderer);
    - a payment widget in a cross-site iframe, a renderer of its own (before: ``DONE`` in
      0.13 s with the order still held);
    - its dedicated Worker, handed the order by ``postMessage`` (before: ``DONE`` in 30 ms,
      the order nobody's, with no key), or the cross-site widget's own worker (before: the
      same, as the widget's session did not attach to its workers);
    - a page that would hand it to a SharedWorker, whose requests bypass the context's
      routing (before: ``DONE`` at once, the order untracked). Session pages have none and
      send the order themselves.
    """

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start=start, idempotency_header=True) as rig:
            outcome, message, took = await rig.click(button, "pay-1")
            assert outcome is Outcome.DONE, message
            assert [p["page"] for p in site.posts] == [[posted]], "DONE before the order reached the server"
            assert took >= HELD_S
            (key,) = site.keys
            assert key.startswith("a_") and key.endswith(".1")
            assert await rig.surfaces[0].active.page.evaluate("typeof SharedWorker") == "undefined"

    asyncio.run(body())


@pytest.mark.parametrize(("start", "button", "posted"), [_PAGE, _CROSS_SITE, _WORKER_CASE, _WIDGET_WORKER])
def test_a_late_reported_request_that_loses_its_response_makes_its_click_unknown(
    sidecar: Sidecar, site: Site, tmp_path: Path, start: str, button: str, posted: str
) -> None:
    """The same, and the server takes the order and drops the connection: ``UNKNOWN``."""

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start=start) as rig:
            site.drop_next_post()
            outcome, message, _ = await rig.click(button, "pay-1")
            assert outcome is Outcome.UNKNOWN, message
            assert "POST" in message and "/submit" in message
            assert [p["page"] for p in site.posts] == [[posted]]

    asyncio.run(body())


def test_a_request_made_between_actions_is_not_the_next_actions(sidecar: Sidecar, site: Site, tmp_path: Path) -> None:
    """The page makes a request of its own while no action runs; the test's route holds it
    until the agent's next click ("Pay", whose own request is held too) runs. The grant asks
    for an ``Idempotency-Key`` on the agent's requests: the page's own request goes out
    without one although it is reported while Pay runs, and Pay's is its first."""

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", idempotency_header=True) as rig:
            page = rig.surfaces[0].active.page
            await page.evaluate("() => { fetch('/submit', {method: 'POST', body: 'page=own'}); }")
            outcome, message, _ = await rig.click("Pay", "pay-1")
            assert outcome is Outcome.DONE, message
            assert [p["page"] for p in site.posts] == [["own"], ["pay"]]
            own, pay = site.keys
            assert own == ""
            assert pay.endswith(".1") and pay.startswith("a_")

    asyncio.run(body())


def test_a_request_a_worker_makes_for_a_click_with_no_reobservation_is_the_clicks(
    sidecar: Sidecar, site: Site, tmp_path: Path
) -> None:
    """With ``skip_reobserve`` the click does not wait for its requests (a lost one amends
    its result later), but the worker's order is still the click's: it carries its key."""

    async def body() -> None:
        rig = Rig(sidecar, site, tmp_path / "ledger.sqlite", start="/workers", idempotency_header=True)
        async with rig:
            outcome, message, _ = await rig.click("Pay by the worker", "worker-1", skip_reobserve=True)
            assert outcome is Outcome.DONE, message
            for _ in range(50):
                if site.keys:
                    break
                await asyncio.sleep(0.1)
            (key,) = site.keys
            assert key.startswith("a_") and key.endswith(".1"), "the worker's order was nobody's"

    asyncio.run(body())


async def _worker_order(rig: Rig, site: Site, lost: bool) -> list[str]:
    """After the last action, whose new worker sends the order: wait for the order (and,
    lost, the amendment), check it is the action's (its body, its key); the action's outcomes."""
    action_id = rig.ledger.entries(kind="result")[-1].action_id
    for _ in range(100):
        results = [e.body_as(ResultBody) for e in rig.ledger.entries(action_id=action_id, kind="result")]
        if site.keys and (not lost or len(results) == 2):
            break
        await asyncio.sleep(0.05)
    assert [p["page"] for p in site.posts] == [["worker"]]
    assert site.keys == [f"{action_id}.1"], "the worker's order was nobody's"
    return [r.outcome for r in results]


@pytest.mark.parametrize("button", ["Pay by a new worker", "Pay by a fetched worker"])
@pytest.mark.parametrize("lost", [False, True], ids=["answered", "lost"])
def test_a_worker_the_click_makes_works_for_the_click(
    sidecar: Sidecar, site: Site, tmp_path: Path, button: str, lost: bool
) -> None:
    """The click's handler makes a new Worker (from a blob, or a script it fetches) and
    hands it the order. The worker attaches to the gate a moment after the click's report
    (the report says the page made one: the dispatch waits for it to attach) and runs its
    script, then the message, in no order with anything the executor can wait on: the click
    may end first (here it does not re-observe). The order is still the click's: it carries its key, and when its
    connection drops the click's result is amended to ``UNKNOWN`` and the target waits for
    a reconcile (before: the order was nobody's, with no key, and the retry went through).
    """

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start="/workers", idempotency_header=True) as rig:
            if lost:
                site.drop_next_post()
            # With no re-observation the click ends as soon as its dispatch returns.
            outcome, message, _ = await rig.click(button, "pay-1", skip_reobserve=True)
            assert outcome is Outcome.DONE, message
            outcomes = await _worker_order(rig, site, lost)
            if not lost:
                assert outcomes == ["DONE"]
                return
            assert outcomes == ["DONE", "UNKNOWN"], outcomes
            retry, _ = await rig.clicked("Pay by the worker", "pay-2")
            assert (retry.outcome, retry.reason) == (Outcome.REFUSED, Reason.RECONCILE_REQUIRED)

    asyncio.run(body())


@pytest.mark.parametrize(
    ("kind", "element", "fields"),
    [
        pytest.param(ActionKind.SELECT, ("combobox", "Plan"), {"values": ("pro",)}, id="select"),
        pytest.param(ActionKind.PRESS, None, {"key": "F9"}, id="key-on-the-page"),
    ],
)
@pytest.mark.parametrize("lost", [False, True], ids=["answered", "lost"])
def test_a_worker_an_unarmed_input_makes_works_for_it(
    sidecar: Sidecar,
    site: Site,
    tmp_path: Path,
    kind: ActionKind,
    element: tuple[str, str] | None,
    fields: dict[str, Any],
    lost: bool,
) -> None:
    """The test above for inputs the guard is not armed for (no report says what they made):
    a choice in a select, and a key pressed on the page. The dispatch counts the page's
    workers before and after the input; the new worker's order carries the action's key
    and, lost, amends its result to ``UNKNOWN`` (before: no key, and a retry went through)."""

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start="/workers", idempotency_header=True) as rig:
            if lost:
                site.drop_next_post()
            result, _ = await rig.acted(kind, "pay-1", element, skip_reobserve=True, **fields)
            assert result.outcome is Outcome.DONE, result.message
            outcomes = await _worker_order(rig, site, lost)
            assert outcomes == (["DONE", "UNKNOWN"] if lost else ["DONE"]), outcomes

    asyncio.run(body())


def test_a_worker_the_page_makes_between_actions_is_nobodys(sidecar: Sidecar, site: Site, tmp_path: Path) -> None:
    """The other side of the rule above: a worker the page makes on its own while no action
    runs, and a page that claims a worker it did not make, give no action a request. The
    worker's order goes out with no key; the click after the false claim still ends (the
    wait for a worker that never attaches is bounded) and its own order is its first."""

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start="/workers", idempotency_header=True) as rig:
            outcome, message, _ = await rig.click("Pay by the worker", "pay-1")
            assert outcome is Outcome.DONE, message
            page = rig.surfaces[0].active.page
            await page.evaluate("() => { worker('running').postMessage('own'); }")
            for _ in range(100):
                if len(site.keys) == 2:
                    break
                await asyncio.sleep(0.05)
            first, own = site.keys
            assert first.endswith(".1") and own == ""
            await page.evaluate(
                "() => document.querySelector('button').addEventListener('click', () => __handrail.workerMade())"
            )
            outcome, message, took = await rig.click("Pay by the worker", "pay-2")
            assert outcome is Outcome.DONE, message
            assert took < HELD_S + 2.0
            assert len(site.keys) == 3 and site.keys[2].endswith(".1") and site.keys[2] != first

    asyncio.run(body())
