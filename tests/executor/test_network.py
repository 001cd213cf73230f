"""Classes 5 and 6: outcomes that know the network, and reads that stay open.

A side-effecting request belongs to the action that started it: one that ends without a
response makes that action UNKNOWN (also after its result, by an amending entry), never
the action that happens to run when it fails; a late response is recorded; while the
target waits for a reconcile the agent may still look.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from handrail.executor import Outcome, Session
from handrail.recorder import Ledger, RequestBody, ResultBody
from handrail.scenarios import FetchShopApp
from handrail.scenarios._hostile import HostileSite, hostile_site
from tests.conftest import AgentSetup, Stack

pytestmark = pytest.mark.browser


@pytest.fixture
def shop() -> Iterator[FetchShopApp]:
    with FetchShopApp() as app:
        yield app


@pytest.fixture(scope="module")
def site() -> Iterator[HostileSite]:
    with hostile_site() as s:
        yield s


def _open(stack: Stack, agent: AgentSetup, url: str, start: str, **scope: object) -> Session:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate", "submit"], [url], **scope)
    session = agent.client.open_session(target=agent.target, start_url=url + start)
    session.observe()
    return session


def _results(stack: Stack, action_id: str) -> list[ResultBody]:
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        return [e.body_as(ResultBody) for e in ledger.entries(action_id=action_id, kind="result")]


def _until(holds: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not holds():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_fetch_that_loses_its_response_is_unknown_and_the_retry_waits(
    stack: Stack, agent: AgentSetup, shop: FetchShopApp
) -> None:
    """The issue's double order: the merchant takes the order, the page says "try again"."""
    session = _open(stack, agent, shop.url, "/")
    shop.drop_next("/api/pay", outage_s=3.0)
    first = session.click(session.find("button", "Pay now"))
    assert first.result.outcome is Outcome.UNKNOWN, first.result
    assert "/api/pay" in first.result.message and first.result.execution_started
    assert len(shop.state()["orders"]) == 1
    # The page invites a retry; the agent's retry waits for a reconcile.
    obs = session.observe()
    assert "Please try again" in obs.snapshot
    retry = session.click(session.find("button", "Pay now"))
    assert (retry.result.outcome, retry.result.reason) == (Outcome.REFUSED, "RECONCILE_REQUIRED")
    # Reads stay open: the agent looks at its orders, and reconciles from what it sees.
    looked = session.navigate(shop.url + "/orders")
    assert looked.result.outcome is Outcome.DONE and looked.observation is not None
    assert "Order #1001" in looked.observation.snapshot
    assert session.reconcile(first.result.action_id, "HAPPENED", "order #1001 is listed").outcome is Outcome.RECONCILED
    assert len(shop.state()["orders"]) == 1


def test_a_request_that_ends_after_the_result_amends_it(stack: Stack, agent: AgentSetup, site: HostileSite) -> None:
    """A later navigation that aborts an earlier click's POST: the click becomes UNKNOWN
    (a second result entry), the navigation is judged on its own."""
    session = _open(stack, agent, site.home, "/slow")
    site.slow_s = 3.0
    click = session.click(session.find("button", "Save slowly"), skip_reobserve=True)
    assert click.result.outcome is Outcome.DONE, click.result
    # The POST is on its way (the server has it, so the gate has passed it as the click's)
    # before the navigation starts. (A request the gate first sees while a later action
    # runs is taken as that later action's: a known limit of attribution by arrival.)
    _until(lambda: site.hits("home").get("POST /api/slow", 0) == 1)
    session.observe()
    away = session.navigate(site.home + "/inside")
    assert away.result.outcome is Outcome.DONE, away.result  # not UNKNOWN for another's request
    _until(lambda: len(_results(stack, click.result.action_id)) == 2)
    first, amended = _results(stack, click.result.action_id)
    assert first.outcome == "DONE" and amended.outcome == "UNKNOWN"
    assert amended.extra.amends is not None and amended.extra.recorded_by == "network"
    assert [r.outcome for r in _results(stack, away.result.action_id)] == ["DONE"]
    session.observe()
    refused = session.navigate(site.home + "/links")  # a read: still allowed
    assert refused.result.outcome is Outcome.DONE
    blocked = session.click(session.find("button", "Order here"))
    assert (blocked.result.outcome, blocked.result.reason) == (Outcome.REFUSED, "RECONCILE_REQUIRED")
    session.reconcile(click.result.action_id, "DID_NOT_HAPPEN", "the save was aborted")


def test_a_late_response_is_recorded(stack: Stack, agent: AgentSetup, site: HostileSite) -> None:
    session = _open(stack, agent, site.home, "/slow")
    site.slow_s = 1.0
    click = session.click(session.find("button", "Save slowly"), skip_reobserve=True)
    assert click.result.outcome is Outcome.DONE

    def late() -> list[RequestBody]:
        with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
            entries = ledger.entries(action_id=click.result.action_id, kind="request")
            return [e.body_as(RequestBody) for e in entries]

    _until(lambda: bool(late()))
    (record,) = late()
    assert record.status == 200 and record.method == "POST" and record.url.endswith("/api/slow")
    assert [r.outcome for r in _results(stack, click.result.action_id)] == ["DONE"]


def test_a_grant_may_ask_for_an_idempotency_key(stack: Stack, agent: AgentSetup, shop: FetchShopApp) -> None:
    session = _open(stack, agent, shop.url, "/", idempotency_header=True)
    paid = session.click(session.find("button", "Pay now"), expect_text="Paid: order #1001")
    assert paid.result.outcome is Outcome.DONE, paid.result
    (key,) = shop.state()["keys"]
    assert key.startswith(paid.result.action_id + ".")


@pytest.mark.slow  # a Chromium of its own
@pytest.mark.parametrize("how", ["form", "fetch"])
def test_chromium_resends_an_unanswered_post_once(site: HostileSite, how: str) -> None:
    """What docs/browser.md says: a POST whose connection closes without a response is sent
    again, with the same body, on a fresh connection; once."""
    import asyncio

    from handrail.executor.browser import BrowserHost

    path = "/order" if how == "form" else "/api/order"

    async def run() -> list[str]:
        host = BrowserHost()
        await host.start()
        try:
            site.drop(path)
            surface = await host.open_page(site.home + ("/links" if how == "form" else "/slow"))
            page = surface.active.page
            name = "Order here" if how == "form" else "Order by fetch"
            await page.get_by_role("button", name=name).click(no_wait_after=True)
            await asyncio.sleep(2.0)
            await surface.close()
        finally:
            site.drop(path, 0)
            await host.close()
        with site._lock:
            return list(site._origins["home"].bodies.get(f"POST {path}", []))

    bodies = asyncio.run(run())
    assert len(bodies) == 2 and bodies[0] == bodies[1], bodies
