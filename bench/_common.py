"""Helpers shared by the benchmarks: percentiles, a tiny page server, the JSON line."""

from __future__ import annotations

import json
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
