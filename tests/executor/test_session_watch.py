"""The loop's watch of a page's network, in process: a real sidecar and ledger, a fake page.

The fake backend plays the page's document loads and side-effecting requests through the
listener the loop gave it, at chosen moments of an action's life (``on_dispatch``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from handrail import ActionKind, Outcome, Reason, Verdict
from handrail.executor._backend import DocumentLoad, SideRequest, SurfaceListener
from handrail.executor.testing import FakeBackend
from handrail.recorder import NavigationBody, RequestBody, ResultBody
from tests.executor.inproc import ORIGIN, Sidecar, running

ELSEWHERE = "https://elsewhere.example"


def run(body: object) -> None:
    asyncio.run(body())  # type: ignore[operator]


def _post(n: int) -> SideRequest:
    return SideRequest(f"r{n}", "POST", ORIGIN + "/api/pay", "t1", "fetch")


def _lost_after_announcing(listener: SurfaceListener, n: int, made_at: float = 0.0) -> asyncio.Future[None]:
    """The page makes request ``n`` (announced now); routing reports its start 0.3 s later,
    and it loses its connection 0.1 s after that."""
    listener.request_announced(f"b{n}", "POST", ORIGIN + "/api/pay", made_at)

    async def reported_late() -> None:
        await asyncio.sleep(0.3)
        listener.request_started(_post(n))
        await asyncio.sleep(0.1)
        listener.request_ended(f"r{n}", 0, "net::ERR_CONNECTION_RESET")

    return asyncio.ensure_future(reported_late())


def test_a_page_load_without_an_action_is_judged_and_logged(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            listener = rig.backend.listener
            assert listener is not None
            out = await listener.judge_load(DocumentLoad(ELSEWHERE + "/x", "GET", "t1", "page"))
            assert not out.allow and out.reason == Reason.OUT_OF_SCOPE
            inside = await listener.judge_load(DocumentLoad(ORIGIN + "/account", "GET", "t1", "page"))
            assert inside.allow
            posted = await listener.judge_load(DocumentLoad(ORIGIN + "/order", "POST", "t1", "page"))
            assert posted.allow  # the grant has submit on this origin
            logged = [e.body_as(NavigationBody) for e in rig.ledger.entries(kind="navigation")]
            assert [(n.url, n.allowed, n.verb, n.cause) for n in logged] == [
                (ELSEWHERE + "/x", False, "navigate", "page"),
                (ORIGIN + "/account", True, "navigate", "page"),
                (ORIGIN + "/order", True, "submit", "page"),
            ]

    run(body)


def test_loads_during_an_action_are_its_own_at_its_urls_and_judged_elsewhere(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        backend = FakeBackend()
        verdicts: list[bool] = []
        loads = (
            (backend.url + "#top", "GET"),  # the action's own page again: its own, not asked about
            (ORIGIN + "/thanks", "GET"),  # elsewhere on its origin: judged (a grant may name paths)
            (ORIGIN + "/pay", "POST"),
            (ELSEWHERE + "/", "GET"),
        )

        async def page_moves(spec: object) -> None:
            assert backend.listener is not None
            for url, method in loads:
                verdicts.append((await backend.listener.judge_load(DocumentLoad(url, method, "t1", "page"))).allow)

        backend.on_dispatch = page_moves
        async with running(sidecar, tmp_path / "ledger.sqlite", backend=backend) as rig:
            await rig.observe()
            r = await rig.act()
            assert verdicts == [True, True, True, False]
            assert r.result.outcome is Outcome.DONE and ELSEWHERE in r.result.message
            logged = [(e.action_id, e.body_as(NavigationBody)) for e in rig.ledger.entries(kind="navigation")]
            assert [(a, n.url, n.verb, n.allowed, bool(n.decision_id)) for a, n in logged] == [
                (r.result.action_id, ORIGIN + "/thanks", "navigate", True, True),
                (r.result.action_id, ORIGIN + "/pay", "submit", True, True),
                (r.result.action_id, ELSEWHERE + "/", "navigate", False, True),
            ]

    run(body)


def test_a_lost_request_makes_its_own_action_unknown_not_the_next(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        backend = FakeBackend()
        started: list[int] = []

        async def start_a_post(spec: object) -> None:
            assert backend.listener is not None
            if not started:  # the first action starts a POST that is still in flight
                backend.listener.request_started(_post(1))
                started.append(1)
            else:  # the second one's navigation aborts it
                backend.listener.request_ended("r1", 0, "net::ERR_ABORTED")

        backend.on_dispatch = start_a_post
        async with running(sidecar, tmp_path / "ledger.sqlite", backend=backend) as rig:
            await rig.observe()
            first = await rig.act(key="pay", skip_reobserve=True)
            assert first.result.outcome is Outcome.DONE
            await rig.observe()
            second = await rig.act(ActionKind.NAVIGATE, key="away", url=ORIGIN + "/orders")
            assert second.result.outcome is Outcome.DONE, second.result
            results = [e.body_as(ResultBody) for e in rig.entries(first.result.action_id, "result")]
            assert [r.outcome for r in results] == ["DONE", "UNKNOWN"]
            assert results[1].extra.amends == rig.entries(first.result.action_id, "result")[0].seq
            assert [a.action_id for a in rig.core.unknown_actions(rig.target)] == [first.result.action_id]
            (lost,) = [e.body_as(RequestBody) for e in rig.entries(first.result.action_id, "request")]
            assert lost.failure == "net::ERR_ABORTED" and lost.status == 0
            assert rig.ledger.verify().ok
            # The same key replays the amended outcome.
            await rig.observe()
            again = await rig.act(key="pay", skip_reobserve=True)
            assert again.result.outcome is Outcome.UNKNOWN

    run(body)


def test_a_request_lost_before_the_result_makes_it_unknown(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        backend = FakeBackend()

        async def lose(spec: object) -> None:
            assert backend.listener is not None
            backend.listener.request_started(_post(1))
            backend.listener.request_ended("r1", 0, "net::ERR_EMPTY_RESPONSE")

        backend.on_dispatch = lose
        async with running(sidecar, tmp_path / "ledger.sqlite", backend=backend) as rig:
            await rig.observe()
            r = await rig.act()
            assert r.result.outcome is Outcome.UNKNOWN and "ERR_EMPTY_RESPONSE" in r.result.message
            assert r.observation is None

    run(body)


@pytest.mark.parametrize("order", ["announced-first", "started-first"])
def test_a_request_is_matched_to_its_announcement_in_either_order(sidecar: Sidecar, tmp_path: Path, order: str) -> None:
    """The browser announces a request on one channel and routing reports its start on
    another; either may come first. Announced first: the action waits for the start
    reported after its dispatch returned, and the request is its own. Started first: the
    late announcement is that request's, not one more to wait for (the action would
    otherwise wait its whole timeout and end UNKNOWN)."""

    async def body() -> None:
        backend = FakeBackend()
        later: list[asyncio.Future[None]] = []

        async def post(spec: object) -> None:
            listener = backend.listener
            assert listener is not None
            if order == "started-first":
                made = time.time()  # the page made it, then routing reported it, then it was announced
                listener.request_started(_post(1))
                listener.request_announced("b1", "POST", ORIGIN + "/api/pay#step", made)
                listener.request_ended("r1", 200, "")
                return
            later.append(_lost_after_announcing(listener, 1))

        backend.on_dispatch = post
        async with running(sidecar, tmp_path / "ledger.sqlite", backend=backend) as rig:
            await rig.observe()
            started = asyncio.get_running_loop().time()
            r = await rig.act(timeout_ms=2_000)
            took = asyncio.get_running_loop().time() - started
            if order == "started-first":
                assert r.result.outcome is Outcome.DONE, r.result
                assert took < 1.0  # nothing left to wait for
            else:
                assert r.result.outcome is Outcome.UNKNOWN, r.result
                assert "ERR_CONNECTION_RESET" in r.result.message
                await later[0]

    run(body)


def test_a_dropped_announcement_is_not_waited_for(sidecar: Sidecar, tmp_path: Path) -> None:
    """A request the page made and aborted before it went out: nothing to wait for."""

    async def body() -> None:
        backend = FakeBackend()

        async def abort(spec: object) -> None:
            assert backend.listener is not None
            backend.listener.request_announced("b1", "POST", ORIGIN + "/api/pay")
            backend.listener.announced_dropped("b1")

        backend.on_dispatch = abort
        async with running(sidecar, tmp_path / "ledger.sqlite", backend=backend) as rig:
            await rig.observe()
            r = await rig.act(timeout_ms=2_000)
            assert r.result.outcome is Outcome.DONE, r.result

    run(body)


def test_while_waiting_for_a_reconcile_reads_go_on_and_writes_wait(sidecar: Sidecar, tmp_path: Path) -> None:
    """Class 6: look at the real state in the session, in this tab or a new one."""

    async def body() -> None:
        backend = FakeBackend()
        async with running(sidecar, tmp_path / "ledger.sqlite", backend=backend) as rig:
            from handrail.executor.testing import Dispatch

            backend.script(Dispatch.maybe_started())
            await rig.observe()
            lost = await rig.act(key="pay")
            assert lost.result.outcome is Outcome.UNKNOWN
            await rig.observe()
            looked = await rig.act(ActionKind.NAVIGATE, url=ORIGIN + "/orders")
            assert looked.result.outcome is Outcome.DONE, looked.result
            intent = rig.entries(looked.result.action_id, "intent")[0]
            assert intent.body["params"]["read"] is True
            await rig.observe()
            tab = await rig.act(ActionKind.TAB_OPEN, url=ORIGIN + "/orders")
            assert tab.result.outcome is Outcome.DONE
            await rig.observe()
            write = await rig.act()
            assert (write.result.outcome, write.result.reason) == (Outcome.REFUSED, Reason.RECONCILE_REQUIRED)
            # Out of scope stays out of scope, and a page's own form post waits.
            await rig.observe()
            out = await rig.act(ActionKind.NAVIGATE, url=ELSEWHERE + "/")
            assert out.result.outcome is Outcome.REFUSED and out.result.reason == Reason.OUT_OF_SCOPE
            assert backend.listener is not None
            post = await backend.listener.judge_load(DocumentLoad(ORIGIN + "/pay", "POST", "t1", "page"))
            assert not post.allow and post.reason == Reason.RECONCILE_REQUIRED
            read = await backend.listener.judge_load(DocumentLoad(ORIGIN + "/orders", "GET", "t1", "page"))
            assert read.allow
            logged = rig.ledger.entries(kind="navigation")[-1].body_as(NavigationBody)
            assert logged.read and logged.allowed
            await rig.core.reconcile(rig.session, lost.result.action_id, Verdict.HAPPENED, "the order is listed")
            await rig.observe()
            assert (await rig.act()).result.outcome is Outcome.DONE

    run(body)


def test_the_start_page_is_judged(sidecar: Sidecar, tmp_path: Path) -> None:
    from handrail.executor._errors import ScopeRefusedError
    from handrail.executor._guard import OpenSpec
    from handrail.executor._models import BackendKind

    async def body() -> None:
        backend = FakeBackend()
        async with running(sidecar, tmp_path / "ledger.sqlite", backend=backend) as rig:
            spec = OpenSpec(BackendKind.BROWSER, rig.target + "-2", ELSEWHERE + "/")
            with pytest.raises(ScopeRefusedError) as info:
                await rig.core.open_session(token=rig.token, agent="", target=rig.target, spec=spec)
            assert info.value.decision_reason == Reason.OUT_OF_SCOPE
            assert backend.started == []

    run(body)


def test_a_start_whose_announcement_never_came_does_not_hide_the_next_request(sidecar: Sidecar, tmp_path: Path) -> None:
    """A request the browser never announces (a new worker's first, made before the gate
    listened to it) is reported by routing alone, between actions. The agent's click then
    makes a request to the same URL, announced as it is made: it is the click's, and the
    click waits for it (a lost one: UNKNOWN). Before, the earlier start was taken for this
    one's (announced late), and the click ended DONE with its order nobody's."""

    async def body() -> None:
        backend = FakeBackend()
        later: list[asyncio.Future[None]] = []

        async def post(spec: object) -> None:
            listener = backend.listener
            assert listener is not None
            later.append(_lost_after_announcing(listener, 2, time.time()))

        backend.on_dispatch = post
        async with running(sidecar, tmp_path / "ledger.sqlite", backend=backend) as rig:
            assert backend.listener is not None
            backend.listener.request_started(_post(1))  # never announced
            backend.listener.request_ended("r1", 200, "")
            await asyncio.sleep(0.01)
            await rig.observe()
            r = await rig.act(timeout_ms=2_000)
            assert r.result.outcome is Outcome.UNKNOWN, r.result
            assert "ERR_CONNECTION_RESET" in r.result.message
            await later[0]

    run(body)
