"""Classes 7 and 8: every action ends, and nothing an agent sends runs unbounded.

- an error known to come before anything reached the page (FILL on a button) is FAILED,
  not started, and blocks nothing;
- closing the last tab leaves a usable session with a blank tab, which the observation
  shows;
- a pattern from an agent runs in RE2 or is refused INVALID_ARGUMENT naming its field, and
  a hostile one (``(a|a)*b`` against a long URL) never holds the event loop for more than
  50 ms (measured by a ticker task, in thread CPU time so that a loaded machine's
  scheduling does not count).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc
import pytest

from handrail._patterns import url_predicate
from handrail.executor import ActionKind, ActionSpec, Outcome, WaitFor
from handrail.executor.browser import BrowserHost
from handrail.proto.executor.v1 import executor_pb2 as pb
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc
from tests.conftest import AgentSetup, Stack
from tests.executor.site import Site, serve

PAGE = """<!doctype html><title>Tabs</title><main><h1>Tabs</h1>
<button>Go</button><label>Name <input name="n"></label></main>"""
HOSTILE = "(a|a)*b"


@pytest.fixture
def site() -> Iterator[Site]:
    with serve({"/tabs": PAGE, "/wait": PAGE}) as s:
        yield s


@pytest.mark.browser
def test_fill_on_a_button_failed_before_reaching_the_page(stack: Stack, agent: AgentSetup, site: Site) -> None:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["input", "submit", "navigate"], [site.url])
    session = agent.client.open_session(target=agent.target, start_url=site.url + "/tabs")
    session.observe()
    r = session.fill(session.find("button", "Go"), "text")
    assert (r.result.outcome, r.result.execution_started) == (Outcome.FAILED, False), r.result
    assert "not an <input>" in r.result.message
    # Nothing waits for a reconcile: the next write goes through.
    session.observe()
    assert session.fill(session.find("textbox", "Name"), "Ada").result.outcome is Outcome.DONE


@pytest.mark.browser
def test_closing_the_last_tab_leaves_a_usable_session(stack: Stack, agent: AgentSetup, site: Site) -> None:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["input", "submit", "navigate"], [site.url])
    session = agent.client.open_session(target=agent.target, start_url=site.url + "/tabs")
    obs = session.observe()
    (only,) = obs.tabs
    closed = session.close_tab(only.tab_id)
    assert closed.result.outcome is Outcome.DONE, closed.result
    assert "blank tab" in closed.result.message
    after = session.observe()
    assert len(after.tabs) == 1 and after.tabs[0].tab_id != only.tab_id and after.url == "about:blank"
    assert session.navigate(site.url + "/tabs").result.outcome is Outcome.DONE


@pytest.mark.browser
def test_a_pattern_re2_cannot_run_is_refused_naming_its_field(stack: Stack, agent: AgentSetup, site: Site) -> None:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate"], [site.url])
    session = agent.client.open_session(target=agent.target, start_url=site.url + "/tabs")
    obs = session.observe()
    channel = grpc.insecure_channel(stack.executor.address)
    try:
        stub = pb_grpc.ExecutorStub(channel)
        md = (("authorization", f"Bearer {agent.principal.token}"),)
        for field, request in (
            ("wait_for.url_matches", {"wait_for": pb.WaitFor(url_matches=r"(a)\1")}),
            ("expect.url_matches", {"expect": pb.Expectation(url_matches=r"(?=x)y")}),
        ):
            waiting = field.startswith("wait_for")
            req = pb.ActRequest(
                session_id=session.session_id,
                observation_id=obs.observation_id,
                kind=pb.ACTION_WAIT_FOR if waiting else pb.ACTION_NAVIGATE,
                url="" if waiting else site.url + "/tabs",
                idempotency_key="k",
                **request,  # type: ignore[arg-type]
            )
            with pytest.raises(grpc.RpcError) as info:
                stub.Act(req, metadata=md)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
            assert info.value.details().startswith(field + ":")  # type: ignore[attr-defined]
    finally:
        channel.close()


class _Ticker:
    """Ticks every 5 ms; records the longest gap in the loop thread's CPU time and in wall time."""

    def __init__(self) -> None:
        self.worst_cpu = 0.0
        self.worst_wall = 0.0
        self._stop = False

    async def run(self) -> None:
        cpu, wall = time.thread_time(), time.monotonic()
        while not self._stop:
            await asyncio.sleep(0.005)
            now_cpu, now_wall = time.thread_time(), time.monotonic()
            self.worst_cpu = max(self.worst_cpu, now_cpu - cpu)
            self.worst_wall = max(self.worst_wall, now_wall - wall - 0.005)
            cpu, wall = now_cpu, now_wall

    def stop(self) -> None:
        self._stop = True


def test_a_hostile_pattern_does_not_hold_the_loop() -> None:
    """The predicate the browser backend waits with, against a URL of 100,000 ``a``."""
    subject = "http://127.0.0.1/?" + "a" * 100_000

    async def run() -> _Ticker:
        ticker = _Ticker()
        ticking = asyncio.ensure_future(ticker.run())
        matches = url_predicate(HOSTILE)
        for _ in range(20):
            assert not matches(subject)
            await asyncio.sleep(0.01)
        ticker.stop()
        await ticking
        return ticker

    ticker = asyncio.run(run())
    assert ticker.worst_cpu < 0.05, f"the loop was held {ticker.worst_cpu * 1000:.0f} ms (CPU)"


@pytest.mark.browser
@pytest.mark.slow  # a Chromium of its own
def test_a_hostile_wait_in_the_browser_does_not_hold_the_loop(site: Site) -> None:
    """A real wait_for.url_matches of ``(a|a)*b`` on a page whose URL is long."""

    async def run() -> tuple[_Ticker, str]:
        host = BrowserHost()
        await host.start()
        try:
            surface = await host.open_page(site.url + "/wait?" + "a" * 5_000)  # no "b" in it
            ticker = _Ticker()
            ticking = asyncio.ensure_future(ticker.run())
            spec = ActionSpec(
                kind=ActionKind.WAIT_FOR,
                observation_id="s:1",
                idempotency_key="k",
                wait_for=WaitFor(url_matches=HOSTILE),
            )
            waited = await surface.dispatch(spec, 1_500)
            ticker.stop()
            await ticking
            await surface.close()
            return ticker, waited.status.value
        finally:
            await host.close()

    ticker, status = asyncio.run(run())
    assert status == "not_started"  # the wait timed out: nothing matched, nothing was sent
    assert ticker.worst_cpu < 0.05, f"the loop was held {ticker.worst_cpu * 1000:.0f} ms (CPU)"
