"""Helpers shared by the benchmarks: percentiles, a tiny page server, the JSON line."""

from __future__ import annotations

import json
import os
import statistics
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def bench_principals(data_dir: Path) -> dict[str, str]:
    """Create the benchmark's agent, operator and executor in ``data_dir``; their tokens.

    Keys: ``agent`` (bench-agent), ``ops`` (bench-ops), ``exec`` (bench-exec).
    """
    from handrail.authz import Store

    with Store(data_dir / "authz.sqlite") as store:
        return {
            "agent": store.add_principal("bench-agent", "agent"),
            "ops": store.add_principal("bench-ops", "operator"),
            "exec": store.add_principal("bench-exec", "executor"),
        }


def pct(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of samples, nearest-rank."""
    ordered = sorted(samples)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary(name: str, samples_s: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        f"{name}_p50_ms": round(statistics.median(ms), 3),
        f"{name}_p99_ms": round(pct(ms, 99), 3),
    }


def emit(bench: str, figures: dict[str, Any], targets: dict[str, Any], met: bool) -> None:
    """Print the one closing JSON line every benchmark ends with."""
    print(json.dumps({"bench": bench, **figures, "targets": targets, "met": met}))


@contextmanager
def serve_pages(pages: dict[str, str]) -> Iterator[str]:
    """Serve fixed HTML pages on a free loopback port; yield the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            if body is None:
                self.send_error(404)
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class ProcessCpu:
    """CPU time of named process trees (each root and every descendant), between two readings
    of ``/proc``: what a piece of work cost each process, per operation.

    A descendant is classed by its command line: Chromium's renderer, GPU and other helper
    processes, Chromium itself, Playwright's driver (node); anything else counts as its
    root's own.
    """

    def __init__(self, roots: dict[str, int]) -> None:
        self.roots = roots
        self._tick = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _kind(cmdline: str) -> str:
        if "chromium" in cmdline or "chrome" in cmdline:
            for kind in ("renderer", "gpu-process", "utility"):
                if f"--type={kind}" in cmdline:
                    return kind.removesuffix("-process")
            return "browser"
        return "driver" if "node" in cmdline.split(" ", 1)[0] else ""

    def read(self) -> dict[str, float]:
        """{"ROOT" or "ROOT/KIND": CPU seconds so far} of every live process of the trees."""
        stats: dict[int, tuple[int, float, str]] = {}  # pid: (parent, cpu s, cmdline)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / self._tick, cmdline)
        out: dict[str, float] = {}
        for pid, (_, cpu, cmdline) in stats.items():
            walk, hops = pid, 0
            while walk in stats and walk not in self.roots.values() and hops < 64:
                walk, hops = stats[walk][0], hops + 1
            root = next((name for name, p in self.roots.items() if p == walk), None)
            if root is None:
                continue
            kind = "" if pid == walk else self._kind(cmdline)
            key = f"{root}/{kind}" if kind else root
            out[key] = out.get(key, 0.0) + cpu
        return out

    def per_op(self, before: dict[str, float], after: dict[str, float], ops: int) -> dict[str, float]:
        """Milliseconds of CPU per operation, by process (those that spent any)."""
        spent = {k: (after.get(k, 0.0) - before.get(k, 0.0)) * 1000 / max(1, ops) for k in after}
        return {k: round(v, 2) for k, v in sorted(spent.items()) if v > 0}
