"""Orders sent over a WebSocket (issue 11, class 5, beyond HTTP).

A checkout that sends its order as a WebSocket message has no request to wait for and no
header to key: the server takes the order, the connection drops before its answer, the
page says "connection lost: please try again", and a retry would place a second order.
A message the action sent is the action's until the socket answers it (any frame received
after it); if the socket ends first, the action is UNKNOWN (its result amended when it was
written already) and the target waits for a reconcile. A message the page sends on its own
is nobody's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from handrail.executor import Outcome, Reason
from handrail.recorder import RequestBody, ResultBody
from tests.executor.inproc import Sidecar
from tests.executor.site import Site, serve
from tests.executor.test_announced_requests import Rig

pytestmark = pytest.mark.browser

SOCKET_SHOP = (
    "<!doctype html><title>Socket shop</title><main><h1>Socket shop</h1><p id=status>idle</p>"
    "<script>var ws = new WebSocket('ws://' + location.host + '/ws');"
    "ws.onmessage = function () { document.getElementById('status').textContent = 'paid'; };"
    "ws.onclose = function () {"
    " document.getElementById('status').textContent = 'connection lost: please try again'; };</script>"
    "<button onclick=\"ws.send('order')\">Pay over the socket</button></main>"
)

# The same shop whose dedicated worker holds the socket (its messages are the worker
# target's events); the page asks it for the socket's state.
_WORKER = (
    "var ws = new WebSocket(location.origin.replace('http', 'ws') + '/ws');"
    "ws.onmessage = function () { postMessage('paid'); };"
    "ws.onclose = function () { postMessage('connection lost: please try again'); };"
    "onmessage = function (e) { if (e.data === 'state') postMessage('state:' + ws.readyState);"
    " else ws.send(e.data); };"
)
WORKER_SHOP = (
    "<!doctype html><title>Socket shop</title><main><h1>Socket shop</h1><p id=status>idle</p>"
    f"<script type=text/worker id=socket>{_WORKER}</script>"
    "<script>var worker = new Worker(URL.createObjectURL(new Blob([document.getElementById('socket').textContent])));"
    "var ws = { readyState: 0 }; worker.onmessage = function (e) {"
    " if (e.data.indexOf('state:') === 0) { ws.readyState = +e.data.slice(6); return; }"
    " document.getElementById('status').textContent = e.data; };"
    "setInterval(function () { worker.postMessage('state'); }, 20);</script>"
    "<button onclick=\"worker.postMessage('order')\">Pay over the socket</button></main>"
)


@pytest.fixture
def site() -> Iterator[Site]:
    with serve({"/shop": SOCKET_SHOP, "/worker-shop": WORKER_SHOP}) as s:
        yield s


async def _open(rig: Rig) -> None:
    page = rig.surfaces[0].active.page
    await page.wait_for_function("() => window.ws && ws.readyState === 1")


async def _results(rig: Rig, action_id: str, count: int) -> list[ResultBody]:
    for _ in range(100):
        results = [e.body_as(ResultBody) for e in rig.ledger.entries(action_id=action_id, kind="result")]
        if len(results) >= count:
            return results
        await asyncio.sleep(0.05)
    return results


@pytest.mark.parametrize("start", ["/shop", "/worker-shop"], ids=["page", "worker"])
@pytest.mark.parametrize("skip_reobserve", [False, True], ids=["reobserved", "no-reobservation"])
def test_an_order_whose_socket_drops_before_its_answer_is_unknown(
    sidecar: Sidecar, site: Site, tmp_path: Path, skip_reobserve: bool, start: str
) -> None:
    """The server takes the order and the connection drops with no answer: the click is
    UNKNOWN (at its result, or by an amendment when the drop comes after it), the loss is
    in the ledger, and the retry the page asks for is refused RECONCILE_REQUIRED (before:
    DONE, and the retry went through). The same when the page's worker holds the socket."""

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start=start) as rig:
            await _open(rig)
            site.drop_next_frame()
            result, _ = await rig.clicked("Pay over the socket", "pay-1", skip_reobserve=skip_reobserve)
            action_id = rig.ledger.entries(kind="result")[-1].action_id
            outcomes = [
                r.outcome for r in await _results(rig, action_id, 1 if result.outcome is Outcome.UNKNOWN else 2)
            ]
            assert outcomes in (["UNKNOWN"], ["DONE", "UNKNOWN"]), outcomes
            assert site.ws_orders == ["order"]
            if outcomes == ["DONE", "UNKNOWN"]:  # the drop came after the result: it is recorded
                (late,) = [e.body_as(RequestBody) for e in rig.ledger.entries(action_id=action_id, kind="request")]
                assert (late.method, late.resource_type, late.status) == ("WEBSOCKET", "websocket", 0)
                assert late.url.endswith("/ws")
            retry, _ = await rig.clicked("Pay over the socket", "pay-2")
            assert (retry.outcome, retry.reason) == (Outcome.REFUSED, Reason.RECONCILE_REQUIRED)
            assert site.ws_orders == ["order"]

    asyncio.run(body())


def test_control_frames_are_no_answer(sidecar: Sidecar, site: Site, tmp_path: Path) -> None:
    """A server that keeps its connections alive with pings, and fails them with a close
    frame: after the order it sends a ping, a pong and a close (1011), and no message.
    None of these is an answer (the browser does not report control frames as received
    messages; were they counted, the click would be DONE): the click is UNKNOWN and the
    retry is refused RECONCILE_REQUIRED."""

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start="/shop") as rig:
            await _open(rig)
            site.drop_next_frame(control=True)
            result, _ = await rig.clicked("Pay over the socket", "pay-1")
            page = rig.surfaces[0].active.page
            await page.wait_for_function("() => ws.readyState === 3")
            action_id = rig.ledger.entries(kind="result")[-1].action_id
            outcomes = [
                r.outcome for r in await _results(rig, action_id, 1 if result.outcome is Outcome.UNKNOWN else 2)
            ]
            assert outcomes in (["UNKNOWN"], ["DONE", "UNKNOWN"]), outcomes
            retry, _ = await rig.clicked("Pay over the socket", "pay-2")
            assert (retry.outcome, retry.reason) == (Outcome.REFUSED, Reason.RECONCILE_REQUIRED)
            assert site.ws_orders == ["order"]

    asyncio.run(body())


def test_an_answered_order_is_done_and_stays_done(sidecar: Sidecar, site: Site, tmp_path: Path) -> None:
    """The other side: the socket answers, then drops. The click stays DONE (its message was
    answered before the drop), and the next order goes through."""

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start="/shop") as rig:
            await _open(rig)
            result, _ = await rig.clicked("Pay over the socket", "pay-1")
            assert result.outcome is Outcome.DONE, result.message
            page = rig.surfaces[0].active.page
            await page.wait_for_function("() => document.getElementById('status').textContent === 'paid'")
            action_id = rig.ledger.entries(kind="result")[-1].action_id
            site.drop_next_frame()
            await page.evaluate("() => ws.send('own')")  # the page's own message, then the drop
            await page.wait_for_function("() => ws.readyState === 3")
            await asyncio.sleep(0.2)
            assert [r.outcome for r in await _results(rig, action_id, 1)] == ["DONE"]
            assert not rig.ledger.entries(kind="request")
            assert site.ws_orders == ["order", "own"]

    asyncio.run(body())


def _hear_workers_late(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate hears every new worker's network 0.3 s late (a slow machine, always)."""
    from handrail.executor.browser._gate import NetworkGate

    announce = NetworkGate._announce_worker

    async def late(self: NetworkGate, worker: object, paused: bool) -> None:
        await asyncio.sleep(0.3)
        await announce(self, worker, paused)  # type: ignore[arg-type]

    monkeypatch.setattr(NetworkGate, "_announce_worker", late)


async def _order_lost_over_a_worker_socket(rig: Rig, site: Site) -> str:
    """Pay over the worker's socket, its answer dropped: the order must end UNKNOWN. What
    the action's results and request entries say (the socket's URL among it)."""
    await _open(rig)
    await asyncio.sleep(0.5)  # the worker's network is heard by now; its socket's making was not
    site.drop_next_frame()
    result, _ = await rig.clicked("Pay over the socket", "pay-1", skip_reobserve=True)
    action_id = rig.ledger.entries(kind="result")[-1].action_id
    results = await _results(rig, action_id, 1 if result.outcome is Outcome.UNKNOWN else 2)
    assert [r.outcome for r in results] in (["UNKNOWN"], ["DONE", "UNKNOWN"])
    return " ".join(r.message for r in results) + " ".join(
        e.body_as(RequestBody).url for e in rig.ledger.entries(action_id=action_id, kind="request")
    )


def test_a_worker_socket_opened_before_it_was_heard_keeps_its_url(
    sidecar: Sidecar, site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that opens its socket as it starts can do so before the gate hears its
    network (Playwright lets it run at once; a slow machine lost the URL so in CI, and the
    ledger said "messages to " nothing). Here the gate hears the worker 0.3 s late, always:
    the order's loss still names the socket's URL, from the tab's sockets no heard one
    accounts for."""
    _hear_workers_late(monkeypatch)

    async def body() -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start="/worker-shop") as rig:
            said = await _order_lost_over_a_worker_socket(rig, site)
            assert f"{site.url.replace('http', 'ws')}/ws" in said, said
            assert site.ws_orders == ["order"]

    asyncio.run(body())


def test_decoy_sockets_make_the_url_a_list_of_candidates_never_a_wrong_one(
    tmp_path: Path, sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page plays with the fallback: its worker opens a decoy socket beside the order's
    before the gate hears it, and the page opens one of its own (heard). The loss names
    both of the worker's candidates (the order's among them), and not the page's own
    socket, which a heard one accounts for. The order is still UNKNOWN and not repeated."""
    _hear_workers_late(monkeypatch)
    decoys = WORKER_SHOP.replace(
        "var ws = new WebSocket(location.origin",
        "var decoy = new WebSocket(location.origin.replace('http', 'ws') + '/ws?decoy');"
        " var ws = new WebSocket(location.origin",
        1,
    ).replace(
        "<script>var worker", "<script>var own = new WebSocket('ws://' + location.host + '/ws?page');var worker", 1
    )
    assert decoys.count("/ws?decoy") == 1 and decoys.count("/ws?page") == 1

    async def body(site: Site) -> None:
        async with Rig(sidecar, site, tmp_path / "ledger.sqlite", start="/decoys") as rig:
            said = await _order_lost_over_a_worker_socket(rig, site)
            origin = site.url.replace("http", "ws")
            assert f"{origin}/ws or {origin}/ws?decoy" in said, said
            assert "/ws?page" not in said, said
            assert site.ws_orders == ["order"]

    with serve({"/decoys": decoys}) as site:
        asyncio.run(body(site))
