"""The executor's overhead over raw Playwright, on a small page and one of 2,000 controls.

In one run, on the same pages served locally, the raw and the guarded samples taken in
turn (one raw, one guarded, ...: both sides under the same load):
- click: raw ``locator.click()`` (the aria-ref locator of a fresh snapshot) in this
  process vs the executor's gRPC ``Act`` with ``skip_reobserve`` (every gate: fresh-observation
  and ref checks, the authz ``Check``, a durable intent, the click, a durable result — but
  not the re-observation); each guarded click cites an observation taken just before it;
- observe: raw ``page.aria_snapshot(mode="ai")`` vs the executor's gRPC ``Observe``, whose
  answer carries the structured element list (one ``Element`` per ref, with its box and
  contexts) besides the snapshot text. Target: the executor's p50 at most the raw p50
  x 1.10 + 1 ms. Timed as an agent observes repeatedly; printed beside it, an Observe
  right after a click changed the page (the list is parsed again) and the SDK's first
  ``find`` on an observation (its element list decoded);
- diff: the bytes of a diff observation after one element changed vs the full snapshot.

Playwright's ``click()`` waits two animation frames (~33 ms at 60 Hz) for the element to
hold still. The executor clicks through its own guarded pointer where its checks leave
that wait nothing to wait for (see ``executor/browser/_pointer.py``), so its click can be faster
than the raw one; the bench says how many of the timed clicks went which way (from the
ledger), and prints a third figure for scale: a bare ``page.mouse.click`` at the button's
centre, with no check at all. For the observe ratio it measures the floor of any answer
served over gRPC: a health check's round trip to the same executor, added to the raw
snapshot (on a 3 ms page that floor alone is over 1.1x).

    python bench/executor_overhead.py [--n 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bench_principals, emit, serve_pages, summary

from handrail.authz import AuthzClient
from handrail.executor import ExecutorClient, Outcome
from handrail.executor.browser import CHROMIUM_ARGS, chromium_path
from handrail.recorder import Ledger
from handrail.scenarios import start_authz, start_executor

SMALL = """<!doctype html><title>small</title><main><h1>Counter</h1><p id=n>0</p>
<button onclick="document.getElementById('n').textContent++">Tap</button></main>"""

LARGE = (
    "<!doctype html><title>large</title><main><h1>Inventory</h1><p id=n>0</p>"
    "<button onclick=\"document.getElementById('n').textContent++\">Tap</button><table>"
    + "".join(
        f"<tr><td>Item {i}</td><td><input aria-label='Qty {i}' value='1'></td>"
        f"<td><button>Edit {i}</button></td><td><a href='#i{i}'>Details {i}</a></td></tr>"
        for i in range(667)
    )
    + "</table></main>"
)
PAGES = {"/small": SMALL, "/large": LARGE}


class RawPage:
    """Raw Playwright on a Chromium of its own, driven from a thread of its own.

    Its samples alternate with the executor's, one by one, so that both sides see the
    same load (the machine this runs on is shared): a ratio is of figures taken together.
    Each sample is timed inside its own event loop.
    """

    def __init__(self, url: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._run(self._open(url))

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _open(self, url: str) -> None:
        from playwright.async_api import async_playwright

        self._pw = await async_playwright().start()
        self._browser = await self._pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        self.page = await self._browser.new_page(viewport={"width": 1280, "height": 800})
        await self.page.goto(url)
        # The same locator an agent's ref gives: aria-ref of the latest snapshot.
        snapshot = await self.page.aria_snapshot(mode="ai")
        ref = next(line for line in snapshot.splitlines() if 'button "Tap"' in line).split("[ref=")[1].split("]")[0]
        self._button = self.page.locator(f"aria-ref={ref}")
        box = await self._button.bounding_box()
        assert box is not None
        self._point = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)

    async def _timed(self, coro: Any) -> float:
        t = time.perf_counter()
        await coro
        return time.perf_counter() - t

    def snapshot(self) -> float:
        return float(self._run(self._timed(self.page.aria_snapshot(mode="ai"))))

    def click(self) -> float:
        return float(self._run(self._timed(self._button.click())))

    def bare_click(self) -> float:
        return float(self._run(self._timed(self.page.mouse.click(*self._point))))

    def close(self) -> None:
        async def stop() -> None:
            await self._browser.close()
            await self._pw.stop()

        self._run(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@dataclass
class Run:
    raw_snaps: list[float]
    raw_clicks: list[float]
    bare_clicks: list[float]
    clicks: list[float]
    observes: list[float]
    after_change: list[float]  # an Observe right after a click changed the page
    finds: list[float]  # the SDK's first find() on an observation
    elements: int
    diff_ratio: float
    session_id: str


def measure(address: str, token: str, url: str, n: int) -> Run:
    """Raw and guarded samples, alternating (the first five of each kind are warm-up)."""
    raw = RawPage(url)
    try:
        with ExecutorClient(address, token) as client:
            session = client.open_session(target="browser:bench", start_url=url)
            raw_snaps, observes = [], []
            for _ in range(n + 5):
                raw_snaps.append(raw.snapshot())
                t = time.perf_counter()
                session.observe()
                observes.append(time.perf_counter() - t)
            raw_clicks, clicks, after_change, finds = [], [], [], []
            for _ in range(n + 5):
                t = time.perf_counter()
                session.observe()  # an agent acts on what it just saw
                after_change.append(time.perf_counter() - t)
                t = time.perf_counter()
                ref = session.find("button", "Tap")
                finds.append(time.perf_counter() - t)
                raw_clicks.append(raw.click())
                t = time.perf_counter()
                r = session.click(ref, skip_reobserve=True)
                clicks.append(time.perf_counter() - t)
                assert r.result.outcome is Outcome.DONE, r.result
            bare_clicks = [raw.bare_click() for _ in range(n + 5)]
            full = session.observe()
            elements = len(getattr(full, "elements", ()))  # an executor before the element list: 0
            session.click(session.find("button", "Tap"), skip_reobserve=True)
            diff = session.observe(diff=True)
            ratio = len(diff.diff.encode()) / len(full.snapshot.encode())
            session.close()
    finally:
        raw.close()
    w = slice(5, None)
    return Run(
        raw_snaps[w],
        raw_clicks[w],
        bare_clicks[w],
        clicks[w],
        observes[w],
        after_change[w],
        finds[w],
        elements,
        ratio,
        session.session_id,
    )


def grpc_round_trip(address: str, n: int) -> list[float]:
    """Round trips of the executor's health check: what any gRPC answer costs at least."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        times = []
        for _ in range(n + 5):
            t = time.perf_counter()
            stub.Check(health_pb2.HealthCheckRequest())
            times.append(time.perf_counter() - t)
    return times[5:]


def click_paths(ledger_path: Path, session_id: str) -> Counter[str]:
    """How the session's clicks went out, as its ledger results say (``via``)."""
    with Ledger(ledger_path) as ledger:
        results = ledger.entries(session_id=session_id, kind="result")
        return Counter(str(e.body.get("extra", {}).get("via", "?")) for e in results)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    n = ap.parse_args().n
    figures: dict[str, float] = {"n": n}
    with tempfile.TemporaryDirectory() as tmp, serve_pages(PAGES) as base:
        data = Path(tmp)
        tokens = bench_principals(data)
        authz = start_authz(data)
        executor = start_executor(data, authz.address, tokens["exec"])
        try:
            with AuthzClient(authz.address, tokens["ops"]) as ops:
                ops.grant("bench-agent", "browser:bench", ["submit", "navigate"], [base])
            for name in ("small", "large"):
                url = f"{base}/{name}"
                g = measure(executor.address, tokens["agent"], url, n)
                raw_clicks, raw_snaps, bare_clicks = g.raw_clicks, g.raw_snaps, g.bare_clicks
                g_clicks, g_observes, diff_ratio = g.clicks, g.observes, g.diff_ratio
                paths = click_paths(data / "ledger.sqlite", g.session_id)
                rtt = statistics.median(grpc_round_trip(executor.address, n))
                figures.update(summary(f"{name}_raw_click", raw_clicks))
                figures.update(summary(f"{name}_guarded_click", g_clicks))
                figures.update(summary(f"{name}_bare_mouse_click", bare_clicks))
                figures[f"{name}_clicks_via_pointer"] = paths["pointer"]
                figures[f"{name}_clicks_via_playwright"] = paths["playwright"]
                figures.update(summary(f"{name}_raw_snapshot", raw_snaps))
                figures.update(summary(f"{name}_observe", g_observes))
                figures.update(summary(f"{name}_observe_after_change", g.after_change))
                figures.update(summary(f"{name}_first_find", g.finds))
                figures[f"{name}_elements"] = g.elements
                figures[f"{name}_click_ratio"] = round(statistics.median(g_clicks) / statistics.median(raw_clicks), 3)
                figures[f"{name}_observe_ratio"] = round(
                    statistics.median(g_observes) / statistics.median(raw_snaps), 3
                )
                # The target: raw x 1.10 + 1 ms (a gRPC round trip alone is ~0.5 ms).
                figures[f"{name}_observe_limit_ms"] = round(statistics.median(raw_snaps) * 1000 * 1.10 + 1.0, 3)
                figures[f"{name}_observe_after_change_ratio"] = round(
                    statistics.median(g.after_change) / statistics.median(raw_snaps), 3
                )
                figures[f"{name}_diff_bytes_ratio"] = round(diff_ratio, 4)
                figures[f"{name}_grpc_round_trip_p50_ms"] = round(rtt * 1000, 3)
                figures[f"{name}_observe_floor_ratio"] = round(
                    (statistics.median(raw_snaps) + rtt) / statistics.median(raw_snaps), 3
                )
                print(
                    f"{name:5}  click raw {figures[f'{name}_raw_click_p50_ms']:.2f} ms  guarded "
                    f"{figures[f'{name}_guarded_click_p50_ms']:.2f} ms  ({figures[f'{name}_click_ratio']:.3f}x)   "
                    f"observe raw {figures[f'{name}_raw_snapshot_p50_ms']:.2f} ms  executor "
                    f"{figures[f'{name}_observe_p50_ms']:.2f} ms  ({figures[f'{name}_observe_ratio']:.3f}x)   "
                    f"diff {100 * diff_ratio:.2f}% of the full snapshot"
                )
                print(
                    f"       observe with its {g.elements} elements: limit {figures[f'{name}_observe_limit_ms']:.2f} ms "
                    f"(raw x 1.10 + 1 ms); right after a click changed the page "
                    f"{figures[f'{name}_observe_after_change_p50_ms']:.2f} ms "
                    f"({figures[f'{name}_observe_after_change_ratio']:.3f}x); the SDK's first find() on it "
                    f"{figures[f'{name}_first_find_p50_ms']:.2f} ms"
                )
                print(
                    f"       guarded clicks: {paths['pointer']} through the executor's pointer, "
                    f"{paths['playwright']} through Playwright's click; a bare mouse.click with no "
                    f"check: {figures[f'{name}_bare_mouse_click_p50_ms']:.2f} ms; a gRPC round trip to the "
                    f"executor {figures[f'{name}_grpc_round_trip_p50_ms']:.2f} ms, so no Observe can beat "
                    f"{figures[f'{name}_observe_floor_ratio']:.3f}x of the raw snapshot"
                )
        finally:
            executor.stop()
            authz.stop()
    targets = {"click_ratio": 1.15, "observe_p50_ms": "<= raw_snapshot_p50_ms x 1.10 + 1", "diff_bytes_ratio": 0.10}
    # The diff target is judged on the large page: on the small one (six lines) the one
    # changed line is a sixth of the bytes whatever the format; its figure is printed too.
    met = all(
        figures[f"{name}_click_ratio"] <= 1.15
        and figures[f"{name}_observe_p50_ms"] <= figures[f"{name}_observe_limit_ms"]
        for name in ("small", "large")
    )
    met = met and figures["large_diff_bytes_ratio"] <= 0.10
    emit("executor_overhead", figures, targets, met)


if __name__ == "__main__":
    main()
