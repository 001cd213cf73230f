"""The desktop backend's costs on a real Xvfb + openbox + Tk window, in one run.

- observe: the backend's observation (window facts of every managed window plus a PNG of
  the target window), in process, and the executor's gRPC ``Observe`` with a screenshot;
- focus check: the backend's ``check_fresh`` for a keystroke (active window, keyboard
  focus, client area, screen size, pointer) — what runs before every write, no screenshot;
- click: a raw ``pyautogui.click`` (``PAUSE = 0``) in this process vs the executor's gRPC
  ``Act`` click with ``skip_reobserve`` (fresh-observation and focus/geometry/point
  checks, the authz ``Check``, a durable intent, the click, a durable result), and the
  same Act with the re-observation (settle + window facts) for reference;
- the authz ``Check`` round trip alone, measured from here, which the target allows for.

    python bench/desktop.py [--n 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bench_principals, emit, summary

from handrail.authz import AuthzClient
from handrail.executor import ActionKind, ActionSpec, DesktopTarget, ExecutorClient, Observation, Outcome
from handrail.executor._backend import ObserveOptions
from handrail.executor.desktop import X11, open_desktop
from handrail.scenarios import VirtualDisplay, start_authz, start_executor
from handrail.scenarios._tkapps import NOTES_LAYOUT, TkApp

TARGET = "desktop:bench"


def _point() -> tuple[int, int]:
    x, y, w, h = NOTES_LAYOUT["pad"]
    return x + w // 2, y + h // 2


async def backend_figures(app: TkApp, n: int) -> tuple[list[float], list[float], list[float]]:
    """observe (facts + PNG) and focus-check samples, from the backend in this process."""
    s = await open_desktop(DesktopTarget(display=app.display, window_id=app.window_id()))
    try:
        observes = []
        raw = await s.observe(ObserveOptions(screenshot=True))
        for _ in range(n + 5):
            t = time.perf_counter()
            raw = await s.observe(ObserveOptions(screenshot=True))
            observes.append(time.perf_counter() - t)
        obs = Observation("b:1", "b", 1, 1, "", raw.title, raw.snapshot, "", 0, desktop=raw.desktop)
        typing = ActionSpec(kind=ActionKind.TYPE, observation_id="b:1", idempotency_key="k", text="x")
        px, py = _point()
        click = ActionSpec(kind=ActionKind.CLICK, observation_id="b:1", idempotency_key="k", x=px, y=py)
        checks, click_checks = [], []
        for _ in range(n + 5):
            t = time.perf_counter()
            refusal = await s.check_fresh(obs, typing, None)
            checks.append(time.perf_counter() - t)
            assert refusal is None, refusal
            t = time.perf_counter()
            refusal = await s.check_fresh(obs, click, None)
            click_checks.append(time.perf_counter() - t)
            assert refusal is None, refusal
    finally:
        await s.close()
    return observes[5:], checks[5:], click_checks[5:]


def raw_clicks(app: TkApp, n: int) -> tuple[list[float], list[float]]:
    import pyautogui

    x = X11(app.display)
    rect = x.client_rect(app.window_id())
    x.close()
    px, py = _point()
    samples = []
    pyautogui.PAUSE = 0
    for _ in range(n + 5):
        t = time.perf_counter()
        pyautogui.click(rect.x + px, rect.y + py)
        samples.append(time.perf_counter() - t)
    pyautogui.PAUSE = 0.1  # pyautogui's default, as a script that leaves it would run
    default = []
    for _ in range(5):
        t = time.perf_counter()
        pyautogui.click(rect.x + px, rect.y + py)
        default.append(time.perf_counter() - t)
    pyautogui.PAUSE = 0
    return samples[5:], default


def guarded(address: str, token: str, app: TkApp, n: int) -> tuple[list[float], list[float], list[float]]:
    px, py = _point()
    with ExecutorClient(address, token) as client:
        session = client.open_session(target=TARGET, desktop=DesktopTarget(window_id=app.window_id()))
        observes = []
        for _ in range(n + 5):
            t = time.perf_counter()
            session.observe(screenshot=True)
            observes.append(time.perf_counter() - t)
        clicks = []
        for _ in range(n + 5):
            t = time.perf_counter()
            r = session.click(x=px, y=py, skip_reobserve=True)
            clicks.append(time.perf_counter() - t)
            assert r.result.outcome is Outcome.DONE, r.result
        reobserved = []
        for _ in range(max(20, n // 5) + 2):
            t = time.perf_counter()
            r = session.click(x=px, y=py)
            reobserved.append(time.perf_counter() - t)
            assert r.result.outcome is Outcome.DONE, r.result
        session.close()
    return observes[5:], clicks[5:], reobserved[2:]


def authz_checks(address: str, token: str, epoch: int, n: int) -> list[float]:
    samples = []
    with AuthzClient(address, token) as authz:
        for _ in range(n + 5):
            t = time.perf_counter()
            authz.check("bench-agent", TARGET, epoch, "submit", window_class="Handrailnotes", window_title="Bench")
            samples.append(time.perf_counter() - t)
    return samples[5:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    n = ap.parse_args().n
    figures: dict[str, float] = {"n": n}
    with tempfile.TemporaryDirectory() as tmp, VirtualDisplay() as vd:
        os.environ["DISPLAY"] = vd.display  # pyautogui here, and the executor process
        data = Path(tmp)
        tokens = bench_principals(data)
        with TkApp("notes", vd.display, title="Bench notes") as app:
            observes, checks, click_checks = asyncio.run(backend_figures(app, n))
            raw, raw_default = raw_clicks(app, n)
            authz = start_authz(data)
            executor = start_executor(data, authz.address, tokens["exec"])
            try:
                with AuthzClient(authz.address, tokens["ops"]) as ops:
                    ops.grant("bench-agent", TARGET, ["submit", "input"], [])
                g_observes, g_clicks, g_reobserved = guarded(executor.address, tokens["agent"], app, n)
                with AuthzClient(authz.address, tokens["ops"]) as ops:
                    epoch = ops.get_lease(TARGET).epoch
                checks_rt = authz_checks(authz.address, tokens["exec"], epoch, n)
            finally:
                executor.stop()
                authz.stop()
    figures.update(summary("observe", observes))
    figures.update(summary("executor_observe", g_observes))
    figures.update(summary("focus_check", checks))
    figures.update(summary("click_check", click_checks))
    figures.update(summary("raw_click", raw))
    figures["raw_click_default_pause_p50_ms"] = round(statistics.median(raw_default) * 1000, 3)
    figures.update(summary("guarded_click", g_clicks))
    figures.update(summary("guarded_click_reobserved", g_reobserved))
    figures.update(summary("authz_check", checks_rt))
    budget = 1.2 * figures["raw_click_p50_ms"] + figures["authz_check_p50_ms"]
    figures["guarded_click_budget_ms"] = round(budget, 3)
    print(
        f"observe {figures['observe_p50_ms']:.2f} ms (gRPC {figures['executor_observe_p50_ms']:.2f})  "
        f"focus check {figures['focus_check_p50_ms']:.3f} ms (click check {figures['click_check_p50_ms']:.3f})  "
        f"click raw {figures['raw_click_p50_ms']:.2f} ms, guarded {figures['guarded_click_p50_ms']:.2f} ms "
        f"(budget {budget:.2f} = 1.2 x raw + authz Check {figures['authz_check_p50_ms']:.2f}), "
        f"with re-observation {figures['guarded_click_reobserved_p50_ms']:.2f} ms"
    )
    targets = {"focus_check_p50_ms": 2.0, "guarded_click_p50_ms": "<= 1.2 x raw_click_p50_ms + authz_check_p50_ms"}
    met = figures["focus_check_p50_ms"] <= 2.0 and figures["guarded_click_p50_ms"] <= budget
    emit("desktop", figures, targets, met)


if __name__ == "__main__":
    main()
