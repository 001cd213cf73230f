"""Chaos: thousands of actions on hostile pages, through Handrail and through raw Playwright refs.

Both sides act on the same pages in the same run, episode by episode in turn (the same
page, the same plan to cancel, the same think time), so that both meet the same load:

- Handrail: ``session.observe()``, think, ``session.click(ref)`` / ``session.type(ref, ...)``
  over gRPC; an action the executor declined (refused, or swallowed before anything
  reached the page) is retried after a fresh observation, twice at most. Episodes
  alternate between an executor clicking with its own guarded pointer and one sending
  every click through Playwright's click (``--playwright-clicks``).
- raw: ``page.aria_snapshot(mode="ai")``, think, ``page.locator("aria-ref=...").click()``,
  as an agent driving Playwright MCP does.

The pages (``handrail.scenarios.PlansApp``): the plans list painted by index (the same
``<button>`` node ends up in another plan's row) on timers and on the pointer's arrival,
a pop-up putting a same-named "Cancel" over the cited one, a clock that changes nothing
the agent cites (nothing may be refused for it), profile fields whose labels trade places,
and an account page whose text poses as a snapshot line naming the delete button.

An action is a *wrong-target dispatch* when the merchant's real state shows an effect the
agent did not ask for (another plan cancelled, "cancel every plan", the account deleted,
text in the other field); a *duplicate submission* when a plan the agent cancelled once is
cancelled again. The Handrail agent finds its targets in the structured element list
(``find("button", "Cancel", within=("row", "Plan E"))``), except on the account page,
where both sides read the ref from the snapshot's text as a text-parsing agent does.

Figures: per side and per page, the rates; the refusal latency (the client's wall time of
the actions the executor declined); the share of cancels that succeed after at most two
re-observations on the re-rendering pages. The machine's load is whatever it is: both
sides share it.

    flock /tmp/handrail-bench.lock .venv/bin/python bench/chaos.py [--actions 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _chaos_pages import (
    _POSING,
    ACCOUNT_PAGES,
    CANCELS_PER_EPISODE,
    EMAIL,
    FIELD_PAGES,
    OUT,
    PAGES,
    PAY_PAGES,
    RERENDER_PAGES,
    SCOPE_PAGES,
    STAY,
    Others,
    Side,
    _actions_after,
    _judge_cancel,
    text_ref,
)
from _common import bench_principals, emit, pct
from guard_pages import cancel_ref, field_ref

from handrail.authz import AuthzClient
from handrail.executor import ElementLookupError, ExecutorClient, NotFoundError, Outcome, Session
from handrail.executor.browser import CHROMIUM_ARGS, chromium_path
from handrail.scenarios import PLAN_IDS, FetchShopApp, PlansApp, hostile_site, start_authz, start_executor


class HandrailAgent:
    """The Handrail side: observe, think, act through the executor; retry after a decline."""

    def __init__(self, sessions: list[Session], app: PlansApp, others: Others, side: Side) -> None:
        self.sessions, self.app, self.others, self.side = sessions, app, others, side

    def _one_tab(self, session: Session) -> None:
        """Close the tabs pages opened (the agent keeps working in its first)."""
        obs = session.observe()
        for tab in obs.tabs[1:]:
            session.close_tab(tab.tab_id)
        if len(obs.tabs) > 1:
            session.switch_tab(obs.tabs[0].tab_id)

    def scope_episode(self, session: Session, page: str, picks: list[tuple[str, str]], think: list[float]) -> None:
        for i, (role, name) in enumerate(picks):
            self._goto(session, f"{self.others.site.home}/links")
            obs = session.observe()
            time.sleep(think[i])
            before = self.others.outside()
            self.side.tasks[page] += 1
            ref = session.find(role, name, obs)
            result = self._act(page, lambda ref=ref: session.click(ref, timeout_ms=3000))
            self._settle(session, result, True)
            time.sleep(0.2)  # a pop-up's or a script's load, if it goes
            self.side.outside[page] += self.others.outside() - before
            if (role, name) in STAY and result.outcome is Outcome.DONE:
                self.side.done[page] += 1
                self.side.done_first[page] += 1
            self._one_tab(session)

    def pay_episode(self, session: Session, page: str, drop: bool, think: list[float]) -> None:
        shop = self.others.shop
        shop.reset()
        self._goto(session, f"{shop.url}/")
        if drop:
            shop.drop_next("/api/pay")
        self.side.tasks[page] += 1
        for tries in range(1, 4):
            obs = session.observe()
            time.sleep(think[tries - 1])
            orders = len(shop.state()["orders"])
            ref = session.find("button", "Pay now", obs)
            result = self._act(page, lambda ref=ref: session.click(ref, timeout_ms=5000))
            if orders:
                self.side.duplicates[page] += len(shop.state()["orders"]) - orders
            if result.outcome is Outcome.UNKNOWN:
                # Reconcile by looking: the orders page is a read, open while the target waits.
                self._goto(session, f"{shop.url}/orders")
                seen = "0 order(s)" not in session.observe().snapshot
                self._settle(session, result, seen)
                if seen:
                    self.side.done[page] += 1
                    break
                self._goto(session, f"{shop.url}/")
                continue
            if result.outcome is Outcome.DONE:
                time.sleep(0.1)
                if "Please try again" not in session.observe().snapshot:
                    self.side.done[page] += 1
                    self.side.done_first[page] += tries == 1
                    break
            elif not self._declined(result):
                break

    def _declined(self, result: Any) -> bool:
        return result.outcome in (Outcome.REFUSED, Outcome.FAILED) and not result.execution_started

    def _act(self, page: str, call: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        self.side.actions[page] += 1
        try:
            result = call().result
        except NotFoundError:
            self.side.refused_ms.append((time.perf_counter() - t0) * 1000)
            self.side.outcomes["NOT_FOUND (ref)"] += 1
            raise
        elapsed = (time.perf_counter() - t0) * 1000
        self.side.outcomes[f"{result.outcome.name} {result.reason}".strip()] += 1
        if self._declined(result):
            (self.side.refused_ms if result.outcome is Outcome.REFUSED else self.side.swallowed_ms).append(elapsed)
        return result

    def _settle(self, session: Session, result: Any, happened: bool) -> None:
        if result.outcome is Outcome.UNKNOWN:  # the bench knows the truth: reconcile
            session.reconcile(result.action_id, "HAPPENED" if happened else "DID_NOT_HAPPEN", "the fixture's state")

    def _goto(self, session: Session, url: str) -> None:
        nav = session.navigate(url)
        if nav.result.outcome is Outcome.UNKNOWN:
            self._settle(session, nav.result, True)
        elif nav.result.outcome is not Outcome.DONE:
            raise RuntimeError(f"could not load {url}: {nav.result}")

    def episode(self, n: int, page: str, plans: list[str], think: list[float], picks: list[tuple[str, str]]) -> None:
        session = self.sessions[n % len(self.sessions)]
        if page in SCOPE_PAGES:
            self.scope_episode(session, page, picks, think)
            return
        if page in PAY_PAGES:
            self.pay_episode(session, page, plans[0] in "ABCD", think)
            return
        if page in ACCOUNT_PAGES:
            self._goto(session, f"{self.app.url}/account")
            obs = session.observe()
            time.sleep(think[0])
            m = _POSING.search(obs.snapshot)  # the first "Pause plan" the text names
            assert m is not None
            before = len(self.app.state()["actions"])
            self.side.tasks[page] += 1
            try:
                result = self._act(page, lambda: session.click(m.group(1), timeout_ms=3000, skip_reobserve=True))
            except NotFoundError:
                # The ref the text names is no node's in this observation: declined too.
                new = _actions_after(self.app, before, 0.15)
                if new:
                    self.side.wrong_note(page, f"asked pause (ref only text names), got {new}")
                return
            new = _actions_after(self.app, before, 1.0 if result.outcome is Outcome.DONE else 0.15)
            self._settle(session, result, bool(new))
            if new == ["pause"]:
                self.side.done[page] += 1
                self.side.done_first[page] += 1
            elif new:
                self.side.wrong_note(page, f"asked pause, got {new}")
            return
        if page in FIELD_PAGES:
            self._goto(session, f"{self.app.url}/profile?{page}")
            self.side.tasks[page] += 1
            for tries in range(1, 4):
                obs = session.observe()
                time.sleep(think[tries - 1])
                try:
                    ref = session.find("textbox", "Email", obs)
                except ElementLookupError:
                    continue
                result = self._act(
                    page,
                    lambda ref=ref: session.type(ref, EMAIL, key_delay_ms=10, timeout_ms=3000, skip_reobserve=True),
                )
                time.sleep(0.15)
                profile = self.app.state()["profile"]
                self._settle(session, result, bool(profile["email"] or profile["phone"]))
                if profile["phone"]:
                    self.side.wrong_note(page, f"text went to phone: {profile['phone']!r}")
                if result.outcome is Outcome.DONE and profile["email"] == EMAIL:
                    self.side.done[page] += 1
                    self.side.done_first[page] += tries == 1
                if not self._declined(result):
                    break
            return
        self._goto(session, f"{self.app.url}/?{page}")
        cancelled: set[str] = set()
        for i, plan in enumerate(plans):
            self.side.tasks[page] += 1
            for tries in range(1, 4):
                obs = session.observe()
                time.sleep(think[(i + tries) % len(think)])
                try:
                    ref = session.find("button", "Cancel", obs, within=("row", f"Plan {plan}"))
                except ElementLookupError:
                    continue
                before = len(self.app.state()["actions"])
                result = self._act(page, lambda ref=ref: session.click(ref, timeout_ms=3000, skip_reobserve=True))
                done = result.outcome is Outcome.DONE
                hit = _judge_cancel(self.side, page, self.app, before, plan, done, cancelled)
                self._settle(session, result, hit)
                if done and hit:
                    self.side.done[page] += 1
                    self.side.done_first[page] += tries == 1
                if not self._declined(result):
                    break


class RawAgent:
    """The raw side: snapshot, think, click the ref the snapshot's text names."""

    def __init__(self, page: Any, app: PlansApp, others: Others, side: Side) -> None:
        self.page, self.app, self.others, self.side = page, app, others, side

    def _one_tab(self) -> None:
        for other in self.page.context.pages:
            if other is not self.page:
                other.close()

    def scope_episode(self, page: str, picks: list[tuple[str, str]], think: list[float]) -> None:
        for i, (role, name) in enumerate(picks):
            self.page.goto(f"{self.others.site.home}/links")
            snapshot = self.page.aria_snapshot(mode="ai")
            time.sleep(think[i])
            before = self.others.outside()
            self.side.tasks[page] += 1
            ref = text_ref(snapshot, role, name)
            done = self._act(page, lambda ref=ref: self.page.locator(f"aria-ref={ref}").click(timeout=3000))
            time.sleep(0.2)
            self.side.outside[page] += self.others.outside() - before
            if (role, name) in STAY and done:
                self.side.done[page] += 1
                self.side.done_first[page] += 1
            self._one_tab()

    def pay_episode(self, page: str, drop: bool, think: list[float]) -> None:
        shop = self.others.shop
        shop.reset()
        self.page.goto(f"{shop.url}/")
        if drop:
            shop.drop_next("/api/pay")
        self.side.tasks[page] += 1
        for tries in range(1, 4):
            snapshot = self.page.aria_snapshot(mode="ai")
            time.sleep(think[tries - 1])
            orders = len(shop.state()["orders"])
            ref = text_ref(snapshot, "button", "Pay now")
            self._act(page, lambda ref=ref: self.page.locator(f"aria-ref={ref}").click(timeout=3000))
            status = self.page.locator("#status")
            with contextlib.suppress(Exception):  # the page says how it went
                status.filter(has_not_text="Paying").wait_for(timeout=3000)
            if orders:
                self.side.duplicates[page] += len(shop.state()["orders"]) - orders
            if "try again" not in (status.text_content() or ""):
                self.side.done[page] += 1
                self.side.done_first[page] += tries == 1
                break

    def _act(self, page: str, call: Callable[[], Any]) -> bool:
        from playwright.sync_api import Error as PlaywrightError

        self.side.actions[page] += 1
        try:
            call()
            return True
        except PlaywrightError:
            return False

    def episode(self, page: str, plans: list[str], think: list[float], picks: list[tuple[str, str]]) -> None:
        if page in SCOPE_PAGES:
            self.scope_episode(page, picks, think)
            return
        if page in PAY_PAGES:
            self.pay_episode(page, plans[0] in "ABCD", think)
            return
        if page in ACCOUNT_PAGES:
            self.page.goto(f"{self.app.url}/account")
            snapshot = self.page.aria_snapshot(mode="ai")
            time.sleep(think[0])
            m = _POSING.search(snapshot)
            assert m is not None
            before = len(self.app.state()["actions"])
            done = self._act(page, lambda: self.page.locator(f"aria-ref={m.group(1)}").click(timeout=3000))
            new = _actions_after(self.app, before, 1.0 if done else 0.15)
            self.side.tasks[page] += 1
            if new == ["pause"]:
                self.side.done[page] += 1
                self.side.done_first[page] += 1
            elif new:
                self.side.wrong_note(page, f"asked pause, got {new}")
            return
        if page in FIELD_PAGES:
            self.page.goto(f"{self.app.url}/profile?{page}")
            snapshot = self.page.aria_snapshot(mode="ai")
            time.sleep(think[0])
            ref = field_ref(snapshot, "Email")
            self.side.tasks[page] += 1
            done = self._act(
                page, lambda: self.page.locator(f"aria-ref={ref}").press_sequentially(EMAIL, delay=10, timeout=3000)
            )
            time.sleep(0.15)
            profile = self.app.state()["profile"]
            if profile["phone"]:
                self.side.wrong_note(page, f"text went to phone: {profile['phone']!r}")
            if done and profile["email"] == EMAIL:
                self.side.done[page] += 1
                self.side.done_first[page] += 1
            return
        self.page.goto(f"{self.app.url}/?{page}")
        cancelled: set[str] = set()
        for i, plan in enumerate(plans):
            self.side.tasks[page] += 1
            snapshot = self.page.aria_snapshot(mode="ai")
            time.sleep(think[(i + 1) % len(think)])
            try:
                ref = cancel_ref(snapshot, f"Plan {plan}")
            except LookupError:
                continue
            before = len(self.app.state()["actions"])
            done = self._act(page, lambda ref=ref: self.page.locator(f"aria-ref={ref}").click(timeout=3000))
            if _judge_cancel(self.side, page, self.app, before, plan, done, cancelled) and done:
                self.side.done[page] += 1
                self.side.done_first[page] += 1


def _rates(side: Side, pages: list[str]) -> tuple[int, int, int, int, int, int]:
    actions = sum(side.actions[p] for p in pages)
    return (
        actions,
        sum(side.wrong[p] for p in pages),
        sum(side.duplicates[p] for p in pages),
        sum(side.tasks[p] for p in pages),
        sum(side.done[p] for p in pages),
        sum(side.done_first[p] for p in pages),
    )


def _episode(seed: int, n: int, think_ms: int) -> tuple[str, list[str], list[float], list[tuple[str, str]]]:
    """Episode ``n``'s page, plans to cancel, think times and controls: the same on both sides."""
    rng = random.Random(seed * 1_000_003 + n)
    plans = rng.sample(PLAN_IDS, CANCELS_PER_EPISODE)
    picks = [rng.choice(OUT), rng.choice(STAY)]
    rng.shuffle(picks)
    return PAGES[n % len(PAGES)], plans, [rng.uniform(0, think_ms) / 1000 for _ in range(4)], picks


def _raw_run(side: Side, actions: int, seed: int, think_ms: int, errors: list[BaseException]) -> None:
    """The raw side, in its own thread: its own fixture app and Chromium."""
    from playwright.sync_api import sync_playwright

    try:
        with PlansApp() as app, hostile_site() as site, FetchShopApp() as shop, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page_ = browser.new_page(viewport={"width": 1280, "height": 800})
            agent = RawAgent(page_, app, Others(site, shop), side)
            n, t0 = 0, time.monotonic()
            while sum(side.actions.values()) < actions:
                page, plans, think, picks = _episode(seed, n, think_ms)
                app.reset()
                agent.episode(page, plans, think, picks)
                n += 1
            side.seconds = time.monotonic() - t0
            browser.close()
    except BaseException as exc:  # reported by the main thread
        errors.append(exc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--actions", type=int, default=2000, help="at least this many actions on each side")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--think-ms", type=int, default=100, help="think time: uniform in 0..this")
    ap.add_argument("--pages", default="", help="only these pages (comma-separated), to try one out")
    args = ap.parse_args()
    if args.pages:
        PAGES[:] = [p for p in PAGES if p in args.pages.split(",")]
    handrail, raw = Side(), Side()
    started = time.monotonic()
    # Both sides run at once, each on its own copy of the fixture app (the merchant's
    # state is per side), through the same episodes.
    errors: list[BaseException] = []
    raw_thread = threading.Thread(target=_raw_run, args=(raw, args.actions, args.seed, args.think_ms, errors))
    with (
        tempfile.TemporaryDirectory() as tmp,
        PlansApp() as app,
        hostile_site() as site,
        FetchShopApp() as shop,
    ):
        data = Path(tmp)
        tokens = bench_principals(data)
        authz = start_authz(data)
        executors = [
            start_executor(data / "pointer", authz.address, tokens["exec"]),
            start_executor(data / "playwright", authz.address, tokens["exec"], extra=["--playwright-clicks"]),
        ]
        try:
            with AuthzClient(authz.address, tokens["ops"]) as ops:
                ops.grant(
                    "bench-agent", "browser:bench", ["submit", "input", "navigate"], [app.url, site.home, shop.url]
                )
            clients = [ExecutorClient(e.address, tokens["agent"]) for e in executors]
            sessions = [c.open_session(target="browser:bench", start_url=app.url + "/") for c in clients]
            ours = HandrailAgent(sessions, app, Others(site, shop), handrail)
            raw_thread.start()
            n = 0
            while sum(handrail.actions.values()) < args.actions:
                page, plans, think, picks = _episode(args.seed, n, args.think_ms)
                app.reset()
                ours.episode(n, page, plans, think, picks)
                n += 1
                if n % 50 == 0:
                    print(
                        f"  {n} episodes, {sum(handrail.actions.values())} / {sum(raw.actions.values())} actions,"
                        f" {time.monotonic() - started:.0f} s",
                        flush=True,
                    )
            handrail.seconds = time.monotonic() - started
            for s in sessions:
                s.close()
            for c in clients:
                c.close()
            while raw_thread.is_alive():  # the raw side is slower (it clicks what it hits)
                raw_thread.join(30)
                print(
                    f"  raw side: {sum(raw.actions.values())} actions, {time.monotonic() - started:.0f} s", flush=True
                )
        finally:
            for e in executors:
                e.stop()
            authz.stop()
    if errors:
        raise errors[0]

    figures: dict[str, Any] = {"handrail_episodes": n, "seconds": round(time.monotonic() - started)}
    print(f"{'page':22} {'handrail: wrong dup done<=3 tries (1st) / tasks':>52}   {'raw: wrong dup done / tasks':>32}")
    for page in PAGES:
        h, r = _rates(handrail, [page]), _rates(raw, [page])
        print(
            f"{page:22} {h[1]:>14} {h[2]:>3} {h[4]:>5} ({h[5]:>4}) / {h[3]:<5} in {h[0]:>4} actions"
            f"   {r[1]:>5} {r[2]:>3} {r[4]:>5} / {r[3]:<5} in {r[0]:>4} actions"
        )
    for name, side in (("handrail", handrail), ("raw", raw)):
        actions, wrong, dup, tasks, done, _ = _rates(side, PAGES)
        figures[f"{name}_actions"] = actions
        figures[f"{name}_wrong_target_dispatches"] = wrong
        figures[f"{name}_wrong_target_rate"] = round(wrong / max(actions, 1), 4)
        figures[f"{name}_duplicate_submissions"] = dup
        figures[f"{name}_requests_outside_grant"] = sum(side.outside.values())
        figures[f"{name}_done_rate"] = round(done / max(tasks, 1), 4)
        _, _, _, rtasks, rdone, rfirst = _rates(side, RERENDER_PAGES)
        figures[f"{name}_rerender_success_within_two_reobservations"] = round(rdone / max(rtasks, 1), 4)
        figures[f"{name}_rerender_success_first_try"] = round(rfirst / max(rtasks, 1), 4)
        for note in side.notes[:6]:
            print(f"  {name} {note}")
    figures["handrail_seconds"], figures["raw_seconds"] = round(handrail.seconds), round(raw.seconds)
    # Refusals (REFUSED, decided before anything was sent to the page) and the actions the
    # page's guard swallowed at input time (FAILED, not started: the pointer had travelled).
    for key, samples in (("refusal", handrail.refused_ms), ("input_time_swallow", handrail.swallowed_ms)):
        figures[f"handrail_{key}s"] = len(samples)
        if samples:
            figures[f"handrail_{key}_latency_p50_ms"] = round(statistics.median(samples), 2)
            figures[f"handrail_{key}_latency_p90_ms"] = round(pct(samples, 90), 2)
    figures["handrail_outcomes"] = dict(handrail.outcomes.most_common())
    targets = {
        "handrail_actions": f">= {args.actions}",
        "raw_actions": f">= {args.actions}",
        "handrail_wrong_target_dispatches": 0,
        "handrail_duplicate_submissions": 0,
        "handrail_requests_outside_grant": 0,
        "handrail_refusal_latency_p50_ms": "<= 30",
        "handrail_rerender_success_within_two_reobservations": ">= 0.95",
    }
    met = (
        figures["handrail_actions"] >= args.actions
        and figures["raw_actions"] >= args.actions
        and figures["handrail_wrong_target_dispatches"] == 0
        and figures["handrail_duplicate_submissions"] == 0
        and figures["handrail_requests_outside_grant"] == 0
        and figures.get("handrail_refusal_latency_p50_ms", 0.0) <= 30
        and figures["handrail_rerender_success_within_two_reobservations"] >= 0.95
    )
    emit("chaos", figures, targets, met)


if __name__ == "__main__":
    main()
