"""The agents' front doors: Playwright MCP itself vs ``handrail mcp``, with the same MCP client.

In one run, on the same locally served pages, with the official SDK's ``ClientSession``
over stdio for both servers:

- Playwright MCP (``@playwright/mcp`` from the npm registry, installed under
  ``bench/.node/`` (git-ignored) on first use, run with the machine's Node and Debian's
  Chromium through ``--executable-path``, headless, isolated);
- ``handrail mcp`` in front of a real executor and authz sidecar (started here).

Figures:
- tool-call latency of ``browser_snapshot`` and ``browser_click`` (p50, p99), on a page of
  a counter and 60 other controls, the two servers' calls taken in turn (same load);
- snapshot bytes of a page of 2,000 controls: full, and Handrail's diff against the
  previous snapshot after one text changed (the page's timer) (Playwright MCP has no diff mode: its full
  snapshot is the figure it offers);
- the wrong-target rate on a page that re-renders its rows by index between the snapshot
  and the click (the same button node now says another plan): a click that lands on
  another plan than the one cited is wrong; a refusal is not.

Targets: click p50 <= Playwright MCP's; snapshot p50 <= 1.2 x Playwright MCP's; diff
snapshot <= 10 % of the full one; Handrail 0 wrong targets. Then, on the same sidecar and
executor, the pixel clicks of the same issue (``bench/pixel.py``'s measurement, shared):
guarded pixel click p50 <= 1.2 x a raw ``mouse.click`` + the guard's own checks measured in
the same run, and 0 wrong targets on the re-rendering page.

    flock /tmp/handrail-bench.lock .venv/bin/python bench/front_doors.py [--n 40] [--trials 20] [--pixel-n 200] [--pixel-attempts 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pixel
from _common import bench_principals, emit, summary
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from handrail.authz import AuthzClient
from handrail.executor.browser import chromium_path
from handrail.scenarios import start_authz, start_executor

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "bench" / ".node"
PLAYWRIGHT_MCP = "@playwright/mcp@0.0.83"
TARGET = "browser:front-doors"
REF = re.compile(r'- (\w+) "([^"]*)" \[ref=(\w+)\]')
PLANS = [f"Plan {c}" for c in "ABCDEFGHIJ"]
VERBOSE = False

LATENCY_PAGE = (
    "<!doctype html><title>Counter</title><main><h1>Counter</h1><p id=n>0</p>"
    "<button onclick=\"document.getElementById('n').textContent++\">Add one</button>"
    + "".join(f"<label>Field {i} <input name=f{i}></label><a href='#l{i}'>Link {i}</a>" for i in range(30))
    + "</main>"
)
BIG_PAGE = (
    "<!doctype html><title>Big</title><main><h1>Two thousand controls</h1><p id=tick>Tick 0</p>"
    + "".join(
        f"<div><button>Button {i}</button><label>Input {i} <input name=i{i}></label>"
        f"<label><input type=checkbox name=c{i}> Check {i}</label><a href='#a{i}'>Link {i}</a></div>"
        for i in range(500)
    )
    + "<script>let t=0;setInterval(()=>{document.getElementById('tick').textContent='Tick '+(++t)},300)</script>"
    + "</main>"
)
# Rows re-rendered by index: the same <button> nodes, labels shifted, when /gen moves.
RERENDER_PAGE = (
    "<!doctype html><title>Plans</title><main><h1>Your plans</h1><ul id=rows></ul><script>"
    f"const plans={PLANS!r};let gen=GEN;const ul=document.getElementById('rows');"
    "for(let i=0;i<plans.length;i++){const li=document.createElement('li');const s=document.createElement('span');"
    "const b=document.createElement('button');b.onclick=async()=>(await fetch('/clicked',{method:'POST',body:b.dataset.plan})).text();"
    "li.append(s,b);ul.append(li);}"
    "function render(){[...ul.children].forEach((li,i)=>{const p=plans[(i+gen)%plans.length];"
    "li.firstChild.textContent=p;li.lastChild.textContent='Cancel '+p;li.lastChild.dataset.plan=p;});}"
    "render();setInterval(async()=>{const g=+(await (await fetch('/gen')).text());"
    "if(g!==gen){gen=g;render();fetch('/ack?g='+g);}},100);"
    "</script></main>"
)


class Site:
    """The bench's pages, and the re-rendering page's generation, acks and clicks."""

    def __init__(self) -> None:
        self.gen = 0
        self.acked = threading.Condition()
        self.last_ack = -1
        self.clicks: list[str] = []
        pages = {"/counter": LATENCY_PAGE, "/big": BIG_PAGE, "/plans": RERENDER_PAGE}
        site = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, body: str, kind: str = "text/html; charset=utf-8") -> None:
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.startswith("/ack?g="):  # a GET: leaving the page never aborts a write
                    with site.acked:
                        site.last_ack = int(self.path.removeprefix("/ack?g="))
                        site.acked.notify_all()
                    self._send("ok", "text/plain")
                elif self.path == "/gen":
                    self._send(str(site.gen), "text/plain")
                elif self.path in pages:  # the plans page starts at the current generation
                    self._send(pages[self.path].replace("GEN", str(site.gen)))
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if self.path == "/clicked":
                    site.clicks.append(body)
                self._send("ok", "text/plain")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], ConnectionError):  # a poll cut short by a navigation
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def rerender(self, timeout: float = 10.0) -> bool:
        """Shift the rows once and wait until the page says it re-rendered."""
        with self.acked:
            self.gen += 1
            return self.acked.wait_for(lambda: self.last_ack == self.gen, timeout)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def ensure_playwright_mcp() -> Path:
    """Playwright MCP's CLI under bench/.node (npm install on first use)."""
    cli = NODE_DIR / "node_modules" / "@playwright" / "mcp" / "cli.js"
    if not cli.exists():
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        (NODE_DIR / "package.json").write_text('{"name": "handrail-bench-node", "private": true}\n')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(NODE_DIR), PLAYWRIGHT_MCP], check=True
        )
    return cli


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def ref_of(snapshot: str, role: str, name: str) -> str:
    refs = [m.group(3) for m in REF.finditer(snapshot) if (m.group(1), m.group(2)) == (role, name)]
    if len(refs) != 1:
        raise RuntimeError(f"{role} {name!r}: {refs}")
    return refs[0]


@contextlib.asynccontextmanager
async def connect(command: str, args: list[str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command, args=args)
    with Path("/dev/null").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            yield session


class Front:
    """One MCP server as the bench drives it."""

    def __init__(self, name: str, session: ClientSession, ref_arg: str) -> None:
        self.name, self.session, self.ref_arg = name, session, ref_arg

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[float, CallToolResult]:
        t = time.perf_counter()
        result = await self.session.call_tool(tool, args)
        return time.perf_counter() - t, result

    async def ok(self, tool: str, args: dict[str, Any]) -> str:
        _, result = await self.call(tool, args)
        if result.is_error:
            raise RuntimeError(f"{self.name} {tool}: {text(result)}")
        return text(result)

    async def patient(self, tool: str, args: dict[str, Any], tries: int = 3) -> str:
        """``ok`` that tries again (said on stderr): a snapshot of 2,000 controls can pass
        the executor's 5 s bound for reading the page on a loaded machine."""
        for attempt in range(1, tries + 1):
            try:
                return await self.ok(tool, args)
            except RuntimeError as exc:
                if attempt == tries:
                    raise
                print(f"  {self.name} {tool}: try {attempt} failed: {str(exc)[:200]}", file=sys.stderr)
        raise AssertionError("unreachable")

    async def snapshot(self) -> str:
        return await self.ok("browser_snapshot", {})

    def click_args(self, element: str, ref: str) -> dict[str, Any]:
        return {"element": element, self.ref_arg: ref}


async def latency(fronts: list[Front], site: Site, n: int) -> dict[str, dict[str, Any]]:
    """Snapshot and click latency on the counter page, the fronts' samples taken in turn
    (one call each, alternately) so that both see the same load."""
    refs = {}
    for front in fronts:
        await front.ok("browser_navigate", {"url": site.base + "/counter"})
        refs[front.name] = ref_of(await front.snapshot(), "button", "Add one")
    snaps: dict[str, list[float]] = {f.name: [] for f in fronts}
    clicks: dict[str, list[float]] = {f.name: [] for f in fronts}
    for i in range(n + 5):
        for front in fronts if i % 2 else reversed(fronts):
            took, result = await front.call("browser_snapshot", {})
            assert not result.is_error, text(result)
            if i >= 5:
                snaps[front.name].append(took)
    for i in range(n + 5):
        for front in fronts if i % 2 else reversed(fronts):
            took, result = await front.call("browser_click", front.click_args("Add one button", refs[front.name]))
            assert not result.is_error, text(result)
            if i >= 5:
                clicks[front.name].append(took)
    return {f.name: {**summary("snapshot", snaps[f.name]), **summary("click", clicks[f.name])} for f in fronts}


async def measure(front: Front, site: Site, trials: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # Snapshot bytes of 2,000 controls, full and (Handrail) diff after one text changed.
    await front.patient("browser_navigate", {"url": site.base + "/big"})
    full = await front.patient("browser_snapshot", {})
    out["big_controls"] = len(REF.findall(full))
    out["snapshot_full_bytes"] = len(full.encode())
    if front.name == "handrail":
        # The page's own timer changes one text every 300 ms: the diff against the full
        # snapshot just taken holds that change.
        await asyncio.sleep(0.4)
        diff = await front.patient("browser_snapshot", {"diff": True})
        if "Tick" not in diff.split("```diff", 1)[-1]:
            raise RuntimeError(f"the diff shows no change of the ticking text:\n{diff}")
        out["snapshot_diff_bytes"] = len(diff.encode())
    else:
        out["snapshot_diff_bytes"] = None

    # Wrong targets on the page that re-renders its rows by index.
    wrong = refused = right = 0
    for trial in range(trials):
        await front.ok("browser_navigate", {"url": site.base + "/plans"})
        snap = await front.snapshot()
        plan = PLANS[trial % len(PLANS)]
        ref = ref_of(snap, "button", f"Cancel {plan}")
        before = len(site.clicks)
        if not site.rerender():
            raise RuntimeError("the plans page did not re-render")
        _, result = await front.call("browser_click", front.click_args(f"Cancel {plan} button", ref))
        await asyncio.sleep(0.3)  # let the page's POST land
        landed = site.clicks[before:]
        if VERBOSE:
            print(
                f"  {front.name} trial {trial}: cited Cancel {plan}, landed {landed}: {text(result)[:300]!r}",
                file=sys.stderr,
            )
        if result.is_error and not landed:
            refused += 1
        elif landed == [plan]:
            right += 1
        else:
            wrong += 1
    out.update(wrong_target=wrong, refused=refused, right_target=right, trials=trials)
    return out


# ---------------------------------------------------------------------------------------
# PIXEL CLICKS (issue 14, pixel-coordinate actions): the other half of this bench, measured
# by bench/pixel.py's ``measure`` on the same sidecar and executor (its own lease target):
# the guarded pixel click's p50 vs a raw mouse.click plus the guard's own checks, wrong
# targets on the re-rendering page; figures and targets prefixed ``pixel_``.
# ---------------------------------------------------------------------------------------
def pixel_figures(
    executor: str, authz: str, tokens: dict[str, str], data: Path, n: int, attempts: int
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    figures, targets, met = pixel.measure(executor, authz, tokens, data, n, attempts)
    return (
        {f"pixel_{k}": v for k, v in figures.items()},
        {f"pixel_{k}": v for k, v in targets.items()},
        met,
    )


async def run_fronts(
    site: Site, executor: str, token: str, n: int, trials: int, out_dir: str
) -> dict[str, dict[str, Any]]:
    cli = ensure_playwright_mcp()
    pw_args = [str(cli), "--headless", "--isolated", "--no-sandbox", "--executable-path", chromium_path()]
    pw_args += ["--output-dir", out_dir]  # where it writes the snapshots its action results link to
    hr_args = ["-m", "handrail", "mcp", "--executor", executor, "--token", token, "--target", TARGET]
    hr_args += ["--start-url", site.base + "/counter"]
    async with connect("node", pw_args) as pw, connect(sys.executable, hr_args) as hr:
        tools = {t.name: t for t in (await pw.list_tools()).tools}
        click_props = tools["browser_click"].input_schema.get("properties", {})
        ref_arg = "ref" if "ref" in click_props else "target"
        fronts = [Front("playwright_mcp", pw, ref_arg), Front("handrail", hr, "ref")]
        for front in fronts:  # warm both up before either is timed
            await front.ok("browser_navigate", {"url": site.base + "/counter"})
            await front.snapshot()
        results = await latency(fronts, site, n)
        for front in fronts:
            results[front.name].update(await measure(front, site, trials))
    return results


@dataclass(frozen=True)
class Stack:
    """The sidecar and executor of the run: addresses, the principals' tokens, a data folder."""

    executor: str
    authz: str
    tokens: dict[str, str]
    data: Path


@contextlib.contextmanager
def stack(base: str) -> Iterator[Stack]:
    """An authz sidecar and an executor; the bench agent granted input, navigate and submit on ``base``."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        tokens = bench_principals(data)
        authz = start_authz(data)
        try:
            executor = start_executor(data, authz.address, tokens["exec"])
            try:
                with AuthzClient(authz.address, tokens["ops"]) as ops:
                    ops.grant("bench-agent", TARGET, ["input", "navigate", "submit"], [base])
                yield Stack(executor.address, authz.address, tokens, data)
            finally:
                executor.stop()
        finally:
            authz.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40, help="timed calls per latency figure")
    ap.add_argument("--trials", type=int, default=20, help="snapshot, re-render, click trials")
    ap.add_argument("--pixel-n", type=int, default=200, help="timed pixel clicks (bench/pixel.py --n)")
    ap.add_argument("--pixel-attempts", type=int, default=20, help="pixel re-render attempts per mode")
    ap.add_argument("--verbose", action="store_true", help="print each re-render trial")
    args = ap.parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    site = Site()
    try:
        with stack(site.base) as st, tempfile.TemporaryDirectory() as out_dir:
            results = asyncio.run(run_fronts(site, st.executor, st.tokens["agent"], args.n, args.trials, out_dir))
            pixel = pixel_figures(st.executor, st.authz, st.tokens, st.data, args.pixel_n, args.pixel_attempts)
    finally:
        site.close()
    report(results, pixel)


def report(results: dict[str, dict[str, Any]], pixel: tuple[dict[str, Any], dict[str, Any], bool]) -> None:
    pw, hr = results["playwright_mcp"], results["handrail"]
    for name, r in results.items():
        diff = r["snapshot_diff_bytes"]
        print(
            f"{name:15s} snapshot p50 {r['snapshot_p50_ms']:8.2f} ms p99 {r['snapshot_p99_ms']:8.2f} ms | "
            f"click p50 {r['click_p50_ms']:8.2f} ms p99 {r['click_p99_ms']:8.2f} ms | "
            f"{r['big_controls']} controls: full {r['snapshot_full_bytes']} B, diff {diff if diff is not None else '-'} B | "
            f"re-render: {r['wrong_target']} wrong, {r['refused']} refused, {r['right_target']} right of {r['trials']}"
        )
    figures: dict[str, Any] = {f"{k}_{name}": v for name, r in results.items() for k, v in r.items()}
    figures["diff_over_full"] = round(hr["snapshot_diff_bytes"] / hr["snapshot_full_bytes"], 4)
    checks = {
        "click_p50_le_playwright_mcp": hr["click_p50_ms"] <= pw["click_p50_ms"],
        "snapshot_p50_le_1.2x_playwright_mcp": hr["snapshot_p50_ms"] <= 1.2 * pw["snapshot_p50_ms"],
        "diff_le_10pct_of_full": figures["diff_over_full"] <= 0.10,
        "handrail_wrong_targets_0": hr["wrong_target"] == 0,
    }
    targets: dict[str, Any] = {
        "click_p50_ms_le": pw["click_p50_ms"],
        "snapshot_p50_ms_le": round(1.2 * pw["snapshot_p50_ms"], 3),
        "diff_over_full_le": 0.10,
        "handrail_wrong_target": 0,
    }
    px, pixel_targets, pixel_met = pixel
    print(
        f"{'pixel (SDK)':15s} guarded click_at p50 {px['pixel_guarded_pixel_click_p50_ms']:8.2f} ms "
        f"(bound {px['pixel_bound_p50_ms']:.2f} ms = 1.2 x raw mouse.click {px['pixel_raw_mouse_click_p50_ms']:.2f} "
        f"+ Check {px['pixel_check_p50_ms']:.2f} + ledger {px['pixel_ledger_pair_p50_ms']:.2f} "
        f"+ in-page check and report {px['pixel_in_page_checks_p50_ms']:.2f}) | "
        f"ref click p50 {px['pixel_guarded_ref_click_p50_ms']:8.2f} ms | re-render: "
        f"{px['pixel_handrail_wrong']} wrong of {px['pixel_handrail_attempts']} "
        f"(raw mouse.click {px['pixel_raw_wrong']} of {px['pixel_raw_attempts']})"
    )
    figures.update(px)
    targets.update(pixel_targets)
    checks["pixel_click_p50_and_0_wrong"] = pixel_met
    for name, ok in checks.items():
        print(f"  {name}: {'met' if ok else 'NOT met'}")
    emit("front_doors", figures, targets, all(checks.values()))


if __name__ == "__main__":
    main()
