"""The browser executor's loop under the failures agents meet: real Chromium, real servers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from handrail.executor import (
    ActionKind,
    AsyncExecutorClient,
    ExecutorClient,
    Outcome,
    Session,
    StaleRefError,
)
from handrail.recorder import Ledger
from handrail.scenarios import start_executor
from tests.conftest import AgentSetup, Stack, grant_needing_approval
from tests.executor.site import Site, serve

pytestmark = pytest.mark.browser

FORM = """<!doctype html><title>Shop</title><main>
<h1>Checkout</h1>
<form method="post" action="/submit">
  <input type="hidden" name="page" value="PAGE">
  <label>Name <input name="name"></label>
  <label>Card <input name="card" type="password"></label>
  <label><input type="checkbox" name="terms"> I agree</label>
  <div id="box"><button>Place order</button></div>
</form>
<p id="status">ready</p>
<button onclick="document.getElementById('status').textContent='poked ' + Date.now()">Poke</button>
</main>"""

PAGES = {"/form": FORM.replace("PAGE", "form"), "/form2": FORM.replace("PAGE", "form2")}


@pytest.fixture
def site() -> Iterator[Site]:
    with serve(PAGES) as s:
        yield s


def _session(
    stack: Stack, agent: AgentSetup, site: Site, verbs: list[str], client: ExecutorClient | None = None
) -> Session:
    with stack.operator_client() as ops:
        # the start page is a document load: it needs navigate on the site's origin
        ops.grant(agent.principal.name, agent.target, [*verbs, "navigate"], [site.url])
    session = (client or agent.client).open_session(target=agent.target, start_url=site.url + "/form")
    session.observe()
    return session


def _refused(response: object, reason: str) -> str:
    result = response.result  # type: ignore[attr-defined]
    assert (result.outcome, result.reason) == (Outcome.REFUSED, reason), result
    assert not result.execution_started
    return str(result.message)


def test_identical_clone_is_refused_not_clicked(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["submit"])
    ref = session.find("button", "Place order")
    site.run_js("var b = document.querySelector('#box button'); b.replaceWith(b.cloneNode(true));")
    message = _refused(session.click(ref), "STALE_REF")
    assert "no longer resolves" in message
    assert site.posts == []


def test_page_text_holding_a_nul_or_a_lone_surrogate_is_observed_and_clicked(
    stack: Stack, agent: AgentSetup, site: Site
) -> None:
    """The page puts U+0000 and lone surrogates, from script, in its button's name, in the
    heading the button's context is read from, and in its title. A lone surrogate in the
    title made Observe answer INTERNAL (no UTF-8 encoder takes one); the sidecar refuses a
    NUL in a check. The executor reads each as U+FFFD: the page is observed, the button is
    found by that name, and the click is judged by its grant like any other."""
    session = _session(stack, agent, site, ["submit"])
    site.run_js(
        "document.querySelector('#box button').setAttribute('aria-label', 'Place\\u0000order \\ud800');"
        "document.querySelector('h1').textContent = 'Check\\ud800out';"
        "document.title = 'Shop \\ud83d';"
    )
    obs = session.observe()
    assert obs.title == "Shop \ufffd"
    ref = session.find("button", "Place\ufffdorder \ufffd")
    r = session.click(ref)
    assert r.result.outcome is Outcome.DONE, r.result.message
    assert len(site.posts) == 1


def test_modal_opened_between_observe_and_act_is_refused(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["submit"])
    ref = session.find("button", "Place order")
    site.run_js(
        "var d = document.createElement('div'); d.setAttribute('role', 'dialog');"
        "d.setAttribute('aria-modal', 'true'); d.setAttribute('aria-label', 'Offer');"
        "d.style.cssText = 'position:fixed;inset:0;background:#fff';"
        "d.innerHTML = '<button>Accept offer</button>'; document.body.appendChild(d);"
    )
    message = _refused(session.click(ref), "STALE_REF")
    assert "modal" in message and "Offer" in message
    assert site.posts == []


def test_a_change_to_an_ancestor_is_named(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["submit"])
    ref = session.find("button", "Place order")
    site.run_js("document.getElementById('box').setAttribute('data-state', 'busy');")
    message = _refused(session.click(ref), "STALE_REF")
    assert "ancestor" in message and "div#box" in message
    # A change elsewhere on the page does not make this element stale.
    session.observe()
    ref = session.find("button", "Place order")
    site.run_js("document.getElementById('status').textContent = 'tick';")
    r = session.click(ref)
    assert r.result.outcome is Outcome.DONE, r.result.message
    assert len(site.posts) == 1


def test_a_tab_opened_by_the_page_does_not_take_the_action(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["submit"])
    ref = session.find("button", "Place order")
    site.run_js("window.open('/form2', '_blank');")
    deadline = time.monotonic() + 10
    while True:
        obs = session.observe()
        if len(obs.tabs) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert [t.active for t in obs.tabs] == [True, False]
    assert obs.active_tab == "t1"
    ref = session.find("button", "Place order")
    r = session.click(ref)
    assert r.result.outcome is Outcome.DONE, r.result.message
    assert [p["page"] for p in site.posts] == [["form"]]


def test_a_dialog_is_seen_refused_and_handled(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["submit", "input"])
    ref = session.find("button", "Place order")
    site.run_js("setTimeout(function () { alert('Session expires soon'); }, 0);")
    time.sleep(0.3)
    message = _refused(session.click(ref), "STALE_OBSERVATION")
    assert "alert dialog" in message
    obs = session.observe()
    assert [(d.type, d.message) for d in obs.dialogs] == [("alert", "Session expires soon")]
    r = session.accept_dialog()
    assert r.result.outcome is Outcome.DONE, r.result.message
    assert r.observation is not None and r.observation.dialogs == ()
    r = session.click(session.find("button", "Place order"))
    assert r.result.outcome is Outcome.DONE
    assert len(site.posts) == 1


def test_lost_connection_after_submit_is_unknown_and_blocks_until_reconciled(
    stack: Stack, agent: AgentSetup, site: Site
) -> None:
    session = _session(stack, agent, site, ["submit", "input", "navigate"])
    assert session.fill(session.find("textbox", "Name"), "Ada").result.outcome is Outcome.DONE
    site.drop_next_post()
    before = session.latest
    ref = session.find("button", "Place order")
    first = session.click(ref, idempotency_key="order-1")
    assert first.result.outcome is Outcome.UNKNOWN, first.result
    assert first.result.execution_started
    assert len(site.posts) == 1
    # The same key: the recorded UNKNOWN, nothing dispatched.
    again = session.click(ref, idempotency_key="order-1")
    assert again.result.outcome is Outcome.UNKNOWN
    assert again.result.action_id == first.result.action_id
    # Reads stay open: the agent may look (a GET navigation, logged as a read) ...
    session.observe()
    looked = session.navigate(site.url + "/form")
    assert looked.result.outcome is Outcome.DONE, looked.result
    # ... but a "retry" with a fresh key is refused, whatever key the agent invents.
    _refused(session.click(session.find("button", "Place order")), "RECONCILE_REQUIRED")
    _refused(
        session.click(session.find("button", "Place order"), idempotency_key="order-1-retry"), "RECONCILE_REQUIRED"
    )
    assert len(site.posts) == 1
    # Observing still works; the agent reconciles from what the merchant shows.
    result = session.reconcile(first.result.action_id, "HAPPENED", "the merchant counted one order")
    assert result.outcome is Outcome.RECONCILED
    repeat = session.click(ref, idempotency_key="order-1", observation=before)
    assert repeat.result.outcome is Outcome.RECONCILED
    assert len(site.posts) == 1


def test_reconcile_rejects_bad_requests(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["submit"])
    with pytest.raises(grpc.RpcError) as info:
        session.reconcile("a_nope", "HAPPENED", "x")
    assert info.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
    r = session.click(session.find("button", "Poke"))
    with pytest.raises(grpc.RpcError) as info:
        session.reconcile(r.result.action_id, "HAPPENED", "x")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    with pytest.raises(grpc.RpcError) as info:
        session.reconcile(r.result.action_id, "HAPPENED", "")
    assert "evidence" in info.value.details()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_takeover_between_check_and_dispatch_is_not_dispatched(
    stack: Stack, agent: AgentSetup, site: Site, tmp_path: Path
) -> None:
    # An executor that pauses 1.5 s after the intent of the action keyed "slow".
    slow = start_executor(
        tmp_path, stack.authz.address, stack.executor_principal.token, extra=["--fault", "after-intent:slow:sleep=1500"]
    )
    try:
        with ExecutorClient(slow.address, agent.principal.token) as client:
            session = _session(stack, agent, site, ["submit"], client)
            ref = session.find("button", "Place order")
            box: dict[str, object] = {}
            worker = threading.Thread(target=lambda: box.update(r=session.click(ref, idempotency_key="slow")))
            worker.start()
            time.sleep(0.7)  # the action is allowed and its intent durable; dispatch waits
            with stack.operator_client() as ops:
                ops.take_over(agent.target)
            worker.join(30)
            r = box["r"].result  # type: ignore[attr-defined]
            assert (r.outcome, r.reason) == (Outcome.REFUSED, "STALE_EPOCH"), r
            assert not r.execution_started
            assert site.posts == []
    finally:
        slow.stop()


def test_batch_runs_in_order_and_stops_at_structural_change(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["submit", "input"])
    name, terms, order, poke = (
        session.find("textbox", "Name"),
        session.find("checkbox", "I agree"),
        session.find("button", "Place order"),
        session.find("button", "Poke"),
    )
    batch = session.batch(
        (ActionKind.FILL, {"ref": name, "text": "Grace"}),
        (ActionKind.CHECK, {"ref": terms}),
        (ActionKind.CLICK, {"ref": order}),
        (ActionKind.CLICK, {"ref": poke}),
    )
    assert [r.outcome for r in batch.results] == [Outcome.DONE, Outcome.DONE, Outcome.DONE], batch.results
    assert batch.not_started == (3,)  # the form post navigated: "Poke" was never tried
    assert "action 2 changed the surface" in batch.stop_reason and "navigated" in batch.stop_reason
    assert site.posts == [{"page": ["form"], "name": ["Grace"], "terms": ["on"]}]
    assert batch.observation is not None and "Thank you" in batch.observation.snapshot


def test_strict_client_raises_typed_errors(stack: Stack, agent: AgentSetup, site: Site) -> None:
    with ExecutorClient(stack.executor.address, agent.principal.token, strict=True) as client:
        session = _session(stack, agent, site, ["submit"], client)
        ref = session.find("button", "Place order")
        site.run_js("var b = document.querySelector('#box button'); b.replaceWith(b.cloneNode(true));")
        with pytest.raises(StaleRefError) as info:
            session.click(ref)
        assert info.value.reason == "STALE_REF"
        assert info.value.result.outcome is Outcome.REFUSED  # type: ignore[attr-defined]


def test_async_client(stack: Stack, agent: AgentSetup, site: Site) -> None:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["submit", "input", "navigate"], [site.url])

    async def run() -> Outcome:
        async with AsyncExecutorClient(stack.executor.address, agent.principal.token) as client:
            session = await client.open_session(target=agent.target, start_url=site.url + "/form")
            await session.observe()
            await session.fill(session.find("textbox", "Name"), "Lin")
            r = await session.click(session.find("button", "Place order"), expect_text="Order received")
            await session.close()
            return r.result.outcome

    assert asyncio.run(run()) is Outcome.DONE
    assert site.posts[0]["name"] == ["Lin"]


def test_diff_and_size_controls(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["submit"])
    full = session.observe()
    session.click(session.find("button", "Poke"), skip_reobserve=True)
    diff = session.observe(diff=True)
    assert diff.is_diff and diff.snapshot == ""
    assert "poked" in diff.diff
    assert len(diff.diff) < 0.5 * len(full.snapshot)
    # The SDK rebuilt the full snapshot: refs of the diff observation resolve.
    assert session.find("button", "Place order")
    shallow = session.observe(depth=1)
    assert len(shallow.snapshot) < len(full.snapshot)
    assert session.observe(screenshot=True, screenshot_scale=0.5).screenshot_scale == 0.5


def test_password_field_is_told_to_authz(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["input"])
    r = session.fill(session.find("textbox", "Name"), "Ada")
    assert r.result.outcome is Outcome.DONE
    r = session.fill(session.find("textbox", "Card"), "4242 4242 4242 4242")
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "POLICY_FORBID"), r.result


def test_wait_for_is_bounded(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site, ["submit"])
    ok = session.wait_for(text="ready", timeout_ms=2000)
    assert ok.result.outcome is Outcome.DONE
    started = time.monotonic()
    missing = session.wait_for(text="never shown", timeout_ms=300)
    assert missing.result.outcome is Outcome.FAILED
    assert time.monotonic() - started < 5


def test_approval_is_bound_to_the_exact_action(stack: Stack, agent: AgentSetup, site: Site) -> None:
    grant_needing_approval(stack, agent, site.url)
    session = agent.client.open_session(target=agent.target, start_url=site.url + "/form")
    obs = session.observe()
    order = session.find("button", "Place order")
    first = session.click(order)
    assert (first.result.outcome, first.result.reason) == (Outcome.REFUSED, "APPROVAL_REQUIRED")
    assert first.result.approval_id
    with stack.operator_client() as ops:
        ops.approve(first.result.approval_id, note="looks right")
    # Another action does not ride on that approval.
    other = session.click(session.find("button", "Poke"))
    assert (other.result.outcome, other.result.reason) == (Outcome.REFUSED, "APPROVAL_REQUIRED")
    assert other.result.approval_id != first.result.approval_id
    # The approved action, citing the same observation, goes through once.
    done = session.click(order, observation=obs)
    assert done.result.outcome is Outcome.DONE, done.result
    assert len(site.posts) == 1


def test_waiting_for_an_approval_that_is_denied_or_times_out(stack: Stack, agent: AgentSetup, site: Site) -> None:
    with stack.operator_client() as ops:
        ops.grant(
            agent.principal.name, agent.target, ["submit", "navigate"], [site.url], require_approval_verbs=["submit"]
        )
    session = agent.client.open_session(target=agent.target, start_url=site.url + "/form")
    session.observe()
    order = session.find("button", "Place order")
    started = time.monotonic()
    timed_out = session.click(order, approval_wait_ms=600)
    assert (timed_out.result.outcome, timed_out.result.reason) == (Outcome.REFUSED, "APPROVAL_REQUIRED")
    assert time.monotonic() - started >= 0.5

    def deny_soon() -> None:
        time.sleep(0.4)
        with stack.operator_client() as ops:
            pending = [a for a in ops.list_approvals(status="PENDING") if a.principal == agent.principal.name]
            for approval in pending:
                ops.deny(approval.approval_id, note="no")

    threading.Thread(target=deny_soon).start()
    denied = session.click(order, approval_wait_ms=10_000)
    assert denied.result.outcome is Outcome.REFUSED
    assert site.posts == []


def test_waiting_for_an_approval_that_is_granted(stack: Stack, agent: AgentSetup, site: Site) -> None:
    with stack.operator_client() as ops:
        ops.grant(
            agent.principal.name, agent.target, ["submit", "navigate"], [site.url], require_approval_verbs=["submit"]
        )
    session = agent.client.open_session(target=agent.target, start_url=site.url + "/form")
    session.observe()

    def approve_soon() -> None:
        deadline = time.monotonic() + 10
        with stack.operator_client() as ops:
            while time.monotonic() < deadline:
                pending = [a for a in ops.list_approvals(status="PENDING") if a.principal == agent.principal.name]
                if pending:
                    ops.approve(pending[0].approval_id)
                    return
                time.sleep(0.05)

    threading.Thread(target=approve_soon).start()
    r = session.click(session.find("button", "Place order"), approval_wait_ms=10_000)
    assert r.result.outcome is Outcome.DONE, r.result
    assert len(site.posts) == 1


KINDS_PAGE = """<!doctype html><title>Kinds</title><main>
<h1 id="h">Kinds</h1>
<label>Size <select name="size"><option>S</option><option>M</option><option>L</option></select></label>
<label><input type="checkbox" checked> Newsletter</label>
<button ondblclick="document.getElementById('h').textContent='double'">Twice</button>
<button onmouseover="document.getElementById('h').textContent='hovered'">Hover me</button>
<label>Note <input name="note" onkeydown="if (event.ctrlKey && event.key === 'a') document.getElementById('h').textContent='select-all'"></label>
<input type="file" aria-label="Attachment">
<a href="/form">To the form</a>
<div style="height: 3000px"></div><p>Bottom of the page</p>
</main>"""


def test_every_browser_action_kind(stack: Stack, agent: AgentSetup, site: Site) -> None:
    site.pages["/kinds"] = KINDS_PAGE
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["submit", "input", "navigate", "upload"], [site.url])
    session = agent.client.open_session(target=agent.target, start_url=site.url + "/kinds")
    session.observe()

    def done(response: object, what: str) -> None:
        result = response.result  # type: ignore[attr-defined]
        assert result.outcome is Outcome.DONE, (what, result)

    size = session.find("combobox", "Size")
    done(session.select(size, "L", expect_field=size, expect_value="L"), "select")
    done(session.uncheck(session.find("checkbox", "Newsletter")), "uncheck")
    done(session.double_click(session.find("button", "Twice"), expect_role="heading", expect_name="double"), "dblclick")
    done(session.hover(session.find("button", "Hover me"), expect_role="heading", expect_name="hovered"), "hover")
    note = session.find("textbox", "Note")
    done(session.type(note, "héllo ü€ 中", key_delay_ms=5, expect_field=note, expect_value="héllo ü€ 中"), "type")
    done(session.hotkey("Control", "a", ref=note, expect_role="heading", expect_name="select-all"), "hotkey")
    done(session.press(note, "End"), "press")
    full = session.observe()
    assert 'button "Twice"' in full.snapshot and "Bottom of the page" in full.snapshot
    done(session.scroll(delta_y=5000), "scroll")
    in_view = session.observe(viewport_only=True)
    assert "Bottom of the page" in in_view.snapshot and 'button "Twice"' not in in_view.snapshot
    # Uploads only come from the executor's upload directory; this one has none.
    session.observe()
    with pytest.raises(grpc.RpcError) as info:
        session.upload(session.find("button", "Attachment"), "x.txt")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert "upload" in info.value.details()  # type: ignore[attr-defined]
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:  # refused before any intent
        intents = {e.action_id for e in ledger.entries(session_id=session.session_id, kind="intent")}
        results = {e.action_id for e in ledger.entries(session_id=session.session_id, kind="result")}
    assert intents == results
    done(session.click(session.find("link", "To the form"), expect_url=r"/form$"), "click link")
    done(session.back(expect_url=r"/kinds$"), "back")
    opened = session.open_tab(site.url + "/form2")
    done(opened, "tab_open")
    assert opened.observation is not None and opened.observation.active_tab == "t2"
    assert [t.tab_id for t in opened.observation.tabs] == ["t1", "t2"]
    done(session.switch_tab("t1", expect_url=r"/kinds$"), "tab_switch")
    closed = session.close_tab("t2")
    done(closed, "tab_close")
    assert closed.observation is not None and [t.tab_id for t in closed.observation.tabs] == ["t1"]


@pytest.mark.slow
def test_a_box_measured_during_a_transition_is_measured_again_after_it(
    stack: Stack, agent: AgentSetup, site: Site
) -> None:
    session = _session(stack, agent, site, ["submit"])
    before = session.find_element("button", "Place order").box
    assert before is not None
    site.run_js(
        "document.querySelector('#box button').style.cssText = 'transition: margin-left 2s linear; margin-left: 300px';"
    )
    session.observe()  # taken while the button slides (its box is somewhere on the way)
    time.sleep(2.5)  # the transition has ended; nothing else happens on the page
    session.observe()
    after = session.find_element("button", "Place order").box
    assert after is not None and after.x == before.x + 300, (before, after)
