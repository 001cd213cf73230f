"""The operator console's live view and a person's input, against the raw parts, in one run.

- live-view latency: a change on the page (a box flips colour; the page notes when) until
  the console's page in Chromium has decoded the frame that shows it — against the raw CDP
  screencast's own latency (``Page.startScreencast`` on the same page in this process,
  until the frame showing the change is decoded here). Target: p50 <= 1.5x raw.
- operator input latency: a click on the console's live view until the page's listener
  fires — against a raw Playwright ``mouse.click`` plus one network hop (a request from the
  console's page to the console). Target: p50 <= 2x (raw + hop).
- frames/s held with 4 sessions viewed at once (an animated page each): the slowest view.
  Target: >= 5 frames/s each.

    flock /tmp/handrail-bench.lock .venv/bin/python bench/console.py [--n 30]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bench_principals, emit

from handrail.authz import AuthzClient
from handrail.console import ConsoleConfig, start_console
from handrail.executor import ExecutorClient
from handrail.executor.browser import CHROMIUM_ARGS, chromium_path
from handrail.scenarios import free_port, start_authz, start_executor

PAGE = """<!doctype html><title>bench</title><body style="margin:0">
<div id=box style="position:fixed;left:0;top:0;width:400px;height:300px;background:#000000"></div>
<script>
var src = new URLSearchParams(location.search).get("src") || "live", n = 0, box = document.getElementById("box");
function beacon(q) { new Image().src = "/beacon?src=" + src + "&" + q; }
function now() { return performance.timeOrigin + performance.now(); }
if (location.search.indexOf("anim") >= 0) {
  (function loop() { n++; box.style.background = n % 2 ? "#ff0000" : "#0000ff"; requestAnimationFrame(loop); })();
} else {
  setInterval(function () { n++; var c = n % 2 ? "ff0000" : "0000ff"; box.style.background = "#" + c;
    requestAnimationFrame(function () { beacon("k=flip&c=" + c + "&t=" + now()); }); }, 500);
}
box.addEventListener("mousedown", function () { beacon("k=click&t=" + now()); });
</script>"""

SAMPLE = """(img) => {
  var c = document.createElement("canvas"); c.width = 1; c.height = 1;
  var g = c.getContext("2d");
  window.__bench = {seen: [], clicks: []};
  var last = "";
  img.addEventListener("frame-shown", function () {
    g.drawImage(img, 20, 20, 1, 1, 0, 0, 1, 1);
    var d = g.getImageData(0, 0, 1, 1).data;
    var col = d[0] > 128 && d[2] < 128 ? "ff0000" : (d[2] > 128 && d[0] < 128 ? "0000ff" : "other");
    if (col !== last) { last = col; window.__bench.seen.push([col, performance.timeOrigin + performance.now()]); }
  });
  img.addEventListener("mousedown", function () { window.__bench.clicks.push(performance.timeOrigin + performance.now()); }, true);
}"""

beacons: list[tuple[str, str, str, float]] = []


class Beacons(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/beacon":
            q = {k: v[0] for k, v in parse_qs(parts.query).items()}
            beacons.append((q.get("src", ""), q.get("k", ""), q.get("c", ""), float(q.get("t", 0))))
            body = b""
        else:
            body = PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def latencies(src: str, seen: list[tuple[str, float]]) -> list[float]:
    """For each flip the page noted, the first sighting of its colour after it (ms)."""
    out = []
    for s, k, c, t in beacons:
        if s == src and k == "flip":
            later = [at for col, at in seen if col == c and at >= t]
            if later:
                out.append(later[0] - t)
    return out


def p50(xs: list[float]) -> float:
    return round(statistics.median(xs), 2) if xs else float("nan")


async def raw_screencast(page: Any, seconds: float, width: int, height: int) -> list[tuple[str, float]]:
    from PIL import Image

    seen: list[tuple[str, float]] = []
    last = [""]
    acks: set[asyncio.Future[Any]] = set()
    cdp = await page.context.new_cdp_session(page)

    def on_frame(params: dict[str, Any]) -> None:
        acks.add(asyncio.ensure_future(cdp.send("Page.screencastFrameAck", {"sessionId": params["sessionId"]})))
        r, _, b = Image.open(io.BytesIO(base64.b64decode(params["data"]))).convert("RGB").getpixel((20, 20))
        col = "ff0000" if r > 128 and b < 128 else ("0000ff" if b > 128 and r < 128 else "other")
        if col != last[0]:
            last[0] = col
            seen.append((col, time.time() * 1000))

    cdp.on("Page.screencastFrame", on_frame)
    await cdp.send("Page.startScreencast", {"format": "jpeg", "quality": 70, "maxWidth": width, "maxHeight": height})
    await asyncio.sleep(seconds)
    await cdp.send("Page.stopScreencast")
    return seen


async def run(n: int) -> None:
    from playwright.async_api import async_playwright

    server = ThreadingHTTPServer(("127.0.0.1", 0), Beacons)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-console-"))
    tokens = bench_principals(tmp)
    port = free_port()  # the console's address, for the sidecar's allowed origin
    authz = start_authz(tmp, extra=["--console-origin", f"http://127.0.0.1:{port}"])
    executor = start_executor(tmp, authz.address, tokens["exec"])
    console = start_console(
        ConsoleConfig(authz=authz.address, executors=(executor.address,), listen=f"127.0.0.1:{port}")
    )
    agent = ExecutorClient(executor.address, tokens["agent"])
    try:
        sessions = []
        with AuthzClient(authz.address, tokens["ops"]) as ops:
            for i in range(5):
                ops.grant("bench-agent", f"browser:bench-{i}", ["navigate", "input"], [site])
        # The animated sessions open only for the frame-rate part: the latencies are measured
        # with one session open, as the raw parts are.
        sessions.append(agent.open_session(target="browser:bench-0", start_url=f"{site}/?src=live"))
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            context = await browser.new_context(viewport={"width": 1400, "height": 1000})
            page = await context.new_page()
            await page.goto(console.url + "/signin")
            await page.get_by_label("Operator token").fill(tokens["ops"])
            await page.get_by_role("button", name="Sign in").click()
            await page.wait_for_url(console.url + "/")

            # 1. Live-view latency, then the raw screencast's, on the same page.
            await page.goto(f"{console.url}/sessions/{sessions[0].session_id}")
            img = page.locator("#screen")
            await img.evaluate(SAMPLE)
            await page.wait_for_function("window.__console.frames > 0")
            start = time.time() * 1000
            await asyncio.sleep(0.5 * n)
            seen = await page.evaluate("window.__bench.seen")
            live = latencies("live", [(c, t) for c, t in seen if t > start])
            raw_page = await context.new_page()
            await raw_page.goto(f"{site}/?src=raw")
            # The raw screencast at the frame size the console asked for (what it shows).
            size = await img.evaluate("(i) => [i.naturalWidth, i.naturalHeight]")
            raw = latencies("raw", await raw_screencast(raw_page, 0.5 * n, size[0], size[1]))

            # 2. A person's click on the live view, against a raw mouse.click plus a hop.
            await page.get_by_role("button", name="Take the wheel").click()
            await page.wait_for_selector("#hand-back:not([hidden])")
            box = await img.bounding_box()
            assert box is not None
            human = []
            for _ in range(n):
                before = len([b for b in beacons if b[0] == "live" and b[1] == "click"])
                await page.mouse.click(box["x"] + 100 * box["width"] / 1280, box["y"] + 100 * box["height"] / 800)
                deadline = time.monotonic() + 5
                while (
                    len([b for b in beacons if b[0] == "live" and b[1] == "click"]) == before
                    and time.monotonic() < deadline
                ):
                    await asyncio.sleep(0.002)
                fired = [b for b in beacons if b[0] == "live" and b[1] == "click"][-1][3]
                human.append(fired - (await page.evaluate("window.__bench.clicks"))[-1])
                await asyncio.sleep(0.05)
            hops = []
            for _ in range(n):
                hops.append(
                    await page.evaluate(
                        "async () => { var t = performance.now(); await fetch('/static/console.css', {cache: 'no-store'}); return performance.now() - t; }"
                    )
                )
            rawclicks = []
            for _ in range(n):
                before = len([b for b in beacons if b[0] == "raw" and b[1] == "click"])
                t0 = time.time() * 1000
                await raw_page.mouse.click(100, 100)
                deadline = time.monotonic() + 5
                while (
                    len([b for b in beacons if b[0] == "raw" and b[1] == "click"]) == before
                    and time.monotonic() < deadline
                ):
                    await asyncio.sleep(0.002)
                rawclicks.append([b for b in beacons if b[0] == "raw" and b[1] == "click"][-1][3] - t0)

            # 3. Frames/s with 4 sessions viewed at once.
            await raw_page.close()
            await page.close()
            for i in range(1, 5):
                sessions.append(agent.open_session(target=f"browser:bench-{i}", start_url=f"{site}/?anim=1"))
            views = []
            for s in sessions[1:]:
                view = await context.new_page()
                await view.goto(f"{console.url}/sessions/{s.session_id}")
                views.append(view)
            for view in views:
                await view.wait_for_function("window.__console.frames > 0", timeout=20_000)
            counts = [await v.evaluate("window.__console.frames") for v in views]
            await asyncio.sleep(5)
            fps = [(await v.evaluate("window.__console.frames") - c) / 5 for v, c in zip(views, counts, strict=True)]
            await browser.close()
    finally:
        for s in sessions:
            s.close()
        agent.close()
        console.stop()
        executor.stop()
        authz.stop()
        server.shutdown()

    figures = {
        "live_view_p50_ms": p50(live),
        "raw_screencast_p50_ms": p50(raw),
        "live_view_samples": len(live),
        "raw_samples": len(raw),
        "human_click_p50_ms": p50(human),
        "raw_click_p50_ms": p50(rawclicks),
        "hop_p50_ms": p50(hops),
        "fps_4_views": [round(f, 1) for f in fps],
        "fps_min_4_views": round(min(fps), 1),
        "frame_size": size,
    }
    live_ok = figures["live_view_p50_ms"] <= 1.5 * figures["raw_screencast_p50_ms"]
    input_ok = figures["human_click_p50_ms"] <= 2 * (figures["raw_click_p50_ms"] + figures["hop_p50_ms"])
    fps_ok = figures["fps_min_4_views"] >= 5
    for k, v in figures.items():
        print(f"{k:>24}: {v}")
    targets = {
        "live_view_p50_vs_raw": f"<= 1.5x ({figures['live_view_p50_ms']} vs {1.5 * figures['raw_screencast_p50_ms']:.1f})",
        "human_click_p50_vs_raw_plus_hop": f"<= 2x ({figures['human_click_p50_ms']} vs {2 * (figures['raw_click_p50_ms'] + figures['hop_p50_ms']):.1f})",
        "fps_each_of_4_views": ">= 5",
    }
    emit("console", figures, targets, bool(live_ok and input_ok and fps_ok))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(run(args.n))


if __name__ == "__main__":
    main()
