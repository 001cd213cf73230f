"""Wrong-target rate on hostile pages: Handrail (both ways a click goes out) vs raw Playwright refs.

The pages are the ``plans`` fixture app's (``handrail.scenarios.PlansApp``): rows re-painted
by index (the same ``<button>`` node ends up in another plan's row) on a timer or on the
first pointer event over a button, a pop-up that puts a same-named "Cancel" over the
cited one, profile fields whose labels trade places on focus or while typing. Each attempt
loads the page afresh, observes, picks a plan (or the "Email" field) and acts once:

- Handrail: ``session.observe()`` then ``session.click(ref)`` / ``session.type(ref, ...)``
  over gRPC, once through an executor clicking with its own guarded pointer and once
  through one sending every click through Playwright's click (``--playwright-clicks``);
- raw: ``page.aria_snapshot(mode="ai")`` then ``page.locator("aria-ref=...").click()``,
  as an agent driving Playwright MCP does (no think time on either side).

The ref is read from the snapshot text on both sides (the Cancel button under the row of
the plan), so the script runs unchanged against older executors. An attempt is a *wrong
target* when the merchant's real state shows an effect the agent did not ask for: another
plan cancelled, "cancel every plan", or text in the other field. An attempt whose click
was refused or failed with nothing done is not wrong, only not done.

    python bench/guard_pages.py [--n 12] [--executor-code DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bench_principals, emit

from handrail.authz import AuthzClient
from handrail.executor import ActionResult, ExecutorClient, Outcome, Session
from handrail.executor.browser import CHROMIUM_ARGS, chromium_path
from handrail.scenarios import PLAN_IDS, PlansApp, start_authz, start_executor

LIST_MODES = [
    "rerender=timer:16",
    "rerender=timer:50",
    "rerender=timer:150",
    "rerender=timer:500",
    "rerender=pointermove",
    "rerender=pointerover",
    "rerender=mouseenter",
    "rerender=pointerdown",
    "rerender=mouseup",
    "overlay=hover:600",
]
FIELD_MODES = ["swap=focus", "swap=advance", "swap=key:3", "swap=timer:150"]


_LINE = re.compile(r'^(?P<indent> *)- (?P<role>[a-z]+)(?: "(?P<name>[^"]*)")?.*?\[ref=(?P<ref>[a-z0-9]+)\]')


def cancel_ref(snapshot: str, plan: str) -> str:
    """The ref of "Cancel" in the row whose first cell is ``plan``, read from the text."""
    in_row, row_indent = False, -1
    for line in snapshot.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        indent = len(m.group("indent"))
        if m.group("role") == "row":
            in_row, row_indent = False, indent
        elif indent > row_indent and m.group("role") == "cell" and m.group("name") == plan:
            in_row = True
        elif in_row and indent > row_indent and m.group("role") == "button" and m.group("name") == "Cancel":
            return m.group("ref")
    raise LookupError(f"no Cancel button in the row of {plan!r}")


def field_ref(snapshot: str, label: str) -> str:
    for line in snapshot.splitlines():
        m = _LINE.match(line)
        if m and m.group("role") == "textbox" and m.group("name") == label:
            return m.group("ref")
    raise LookupError(f"no textbox {label!r}")


@dataclass
class Tally:
    attempts: int = 0
    done: int = 0  # at the first try
    done_by_third: int = 0  # after at most two re-observations (Handrail only)
    wrong: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, done: bool, wrong: str, tries: int = 1) -> None:
        self.attempts += 1
        self.done += done and tries == 1
        self.done_by_third += done
        if wrong:
            self.wrong += 1
            self.notes.append(wrong)


def _judge_list(app: PlansApp, before: int, plan: str, done: bool) -> str:
    deadline = time.monotonic() + (1.5 if done else 0.3)
    while time.monotonic() < deadline:
        state = app.state()
        if len(state["actions"]) > before:
            break
        time.sleep(0.02)
    time.sleep(0.1)
    new = app.state()["actions"][before:]
    wrong = [a for a in new if a != f"cancel {plan}"]
    return f"asked cancel {plan}, got {new}" if wrong else ""


def _judge_field(app: PlansApp) -> str:
    time.sleep(0.3)
    profile = app.state()["profile"]
    return f"text went to phone: {profile['phone']!r}" if profile["phone"] else ""


def _settle_unknown(session: Session, result: ActionResult, happened: bool) -> None:
    # An UNKNOWN outcome blocks the target until reconciled: the bench knows the truth.
    if result.outcome is Outcome.UNKNOWN:
        verdict = "HAPPENED" if happened else "DID_NOT_HAPPEN"
        session.reconcile(result.action_id, verdict, "the fixture's state, read by the bench")


def _goto(session: Session, url: str) -> None:
    nav = session.navigate(url)
    if nav.result.outcome is Outcome.UNKNOWN:
        # The navigation aborted an autosave still in flight from the page before: the
        # page is loaded all the same (and the bench reads the merchant's state itself).
        _settle_unknown(session, nav.result, True)
    elif nav.result.outcome is not Outcome.DONE:
        raise RuntimeError(f"could not load {url}: {nav.result}")


def handrail_side(session: Session, app: PlansApp, mode: str, n: int, rng: random.Random) -> Tally:
    """Each attempt: load, observe, act; not done, observe again and retry, twice at most."""
    tally = Tally()
    for _ in range(n):
        app.reset()
        field_mode = mode in FIELD_MODES
        _goto(session, f"{app.url}/profile?{mode}" if field_mode else f"{app.url}/?{mode}")
        plan = rng.choice(PLAN_IDS)
        done, tries = False, 0
        while not done and tries < 3:
            tries += 1
            obs = session.observe()
            if field_mode:
                ref = field_ref(obs.snapshot, "Email")
                r = session.type(ref, "ada@example.com", key_delay_ms=20, timeout_ms=3000, skip_reobserve=True)
            else:
                r = session.click(cancel_ref(obs.snapshot, f"Plan {plan}"), timeout_ms=1500, skip_reobserve=True)
            done = r.result.outcome is Outcome.DONE
            if r.result.outcome is Outcome.UNKNOWN:
                state = app.state()
                _settle_unknown(session, r.result, bool(state["profile"]["email"] or state["actions"]))
                break
        wrong = _judge_field(app) if field_mode else _judge_list(app, 0, plan, done)
        tally.add(done, wrong, tries)
    return tally


async def raw_side(app: PlansApp, modes: list[str], n: int, seed: int) -> dict[str, Tally]:
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import async_playwright

    rng = random.Random(seed)
    out: dict[str, Tally] = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 800})
        for mode in modes:
            tally = out[mode] = Tally()
            for _ in range(n):
                app.reset()
                if mode in FIELD_MODES:
                    await page.goto(f"{app.url}/profile?{mode}")
                    snapshot = await page.aria_snapshot(mode="ai")
                    ref = field_ref(snapshot, "Email")
                    try:
                        await page.locator(f"aria-ref={ref}").press_sequentially(
                            "ada@example.com", delay=20, timeout=3000
                        )
                        done = True
                    except PlaywrightError:
                        done = False
                    tally.add(done, _judge_field(app))
                    continue
                await page.goto(f"{app.url}/?{mode}")
                plan = rng.choice(PLAN_IDS)
                snapshot = await page.aria_snapshot(mode="ai")
                ref = cancel_ref(snapshot, f"Plan {plan}")
                try:
                    await page.locator(f"aria-ref={ref}").click(timeout=1500)
                    done = True
                except PlaywrightError:
                    done = False
                tally.add(done, _judge_list(app, 0, plan, done))
        await browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=12, help="attempts per page and side")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--executor-code",
        default="",
        help="run the executors from this directory (one holding a 'handrail' package: an older"
        " commit's code, to measure before a change); the bench, the SDK and the pages stay these",
    )
    args = ap.parse_args()
    modes = LIST_MODES + FIELD_MODES
    results: dict[str, dict[str, Tally]] = {}
    with tempfile.TemporaryDirectory() as tmp, PlansApp() as app:
        data = Path(tmp)
        tokens = bench_principals(data)
        authz = start_authz(data)
        env = {"PYTHONPATH": args.executor_code} if args.executor_code else None
        here = os.getcwd()
        if args.executor_code:
            os.chdir(args.executor_code)  # `python -m handrail` looks in its working directory first
        try:
            executors = {
                "pointer": start_executor(data / "pointer", authz.address, tokens["exec"], env=env),
                "playwright": start_executor(
                    data / "playwright", authz.address, tokens["exec"], extra=["--playwright-clicks"], env=env
                ),
            }
        finally:
            os.chdir(here)
        try:
            with AuthzClient(authz.address, tokens["ops"]) as ops:
                ops.grant("bench-agent", "browser:bench", ["submit", "input", "navigate"], [app.url])
            for side, executor in executors.items():
                rng = random.Random(args.seed)
                with ExecutorClient(executor.address, tokens["agent"]) as client:
                    session = client.open_session(target="browser:bench", start_url=app.url + "/")
                    session.observe()
                    results[f"handrail_{side}"] = {m: handrail_side(session, app, m, args.n, rng) for m in modes}
                    session.close()
            results["raw"] = asyncio.run(raw_side(app, modes, args.n, args.seed))
        finally:
            for executor in executors.values():
                executor.stop()
            authz.stop()
    figures: dict[str, float] = {"n": args.n}
    print(f"{'page':24} " + "  ".join(f"{side:>38}" for side in results))
    for mode in modes:
        cells = []
        for side, by_mode in results.items():
            t = by_mode[mode]
            third = f" ({t.done_by_third:2} by 3rd)" if side != "raw" else " " * 12
            cells.append(f"wrong {t.wrong:2}/{t.attempts:<2} done {t.done:2}/{t.attempts:<2}{third}")
            key = f"{side}_{mode.replace('=', '_').replace(':', '_')}"
            figures[f"{key}_wrong"] = t.wrong
            if side != "raw":
                figures[f"{key}_done_by_third_try"] = t.done_by_third
        print(f"{mode:24} " + "  ".join(f"{c:>38}" for c in cells))
    for side, by_mode in results.items():
        attempts = sum(t.attempts for t in by_mode.values())
        wrong = sum(t.wrong for t in by_mode.values())
        done = sum(t.done for t in by_mode.values())
        figures[f"{side}_attempts"] = attempts
        figures[f"{side}_wrong_target_rate"] = round(wrong / attempts, 4)
        figures[f"{side}_done_rate"] = round(done / attempts, 4)
        third = sum(t.done_by_third for t in by_mode.values())
        if side != "raw":
            figures[f"{side}_done_by_third_try_rate"] = round(third / attempts, 4)
        print(
            f"{side}: {wrong}/{attempts} wrong targets ({100 * wrong / attempts:.1f} %), {done} done at the first try"
            + (f", {third} after at most two re-observations" if side != "raw" else "")
        )
        for mode, t in by_mode.items():
            for note in t.notes[:2]:
                print(f"    {mode}: {note}")
    targets = {"handrail_pointer_wrong_target_rate": 0.0, "handrail_playwright_wrong_target_rate": 0.0}
    met = all(figures[k] <= v for k, v in targets.items())
    emit("guard_pages", figures, targets, met)


if __name__ == "__main__":
    main()
