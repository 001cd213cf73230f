"""Fuzz both services, started as a user would, with requests generated from the .proto.

Starts ``handrail authz serve`` and ``handrail executor serve`` (real processes, real
Chromium, real SQLite), adds the fuzz's principals (an agent with one grant, another
agent, an operator, an executor, an admin, a revoked agent), then sends N requests built
by ``tests/fuzz/harness.py`` from the message descriptors of every RPC of both services,
under every identity, with hostile values mixed in. It prints the status codes per RPC,
then one JSON line with: crashes (a server that exited), wrong allows (an OK the role
table or the grants forbid), INTERNAL/UNKNOWN answers, the RSS growth of both servers
from after a warm-up (a tenth of the requests) to the end, and whether ``handrail ledger
verify`` holds afterwards.

    flock /tmp/handrail-bench.lock .venv/bin/python bench/fuzz.py [--requests 3000]

Targets: 0 crashes, 0 wrong allows, 0 INTERNAL/UNKNOWN, RSS growth < 20 % per server.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from handrail.authz import Store  # noqa: E402
from handrail.scenarios import SubscriptionApp, start_authz, start_executor  # noqa: E402
from tests.fuzz.harness import Fuzzer, prepare_world, rss_kb  # noqa: E402


def run(requests: int, data_dir: Path, *, quiet: bool = False) -> dict[str, object]:
    """Fuzz a fresh stack in ``data_dir`` with ``requests`` calls; the figures."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with Store(data_dir / "authz.sqlite") as store:
        executor_token = store.add_principal("fz-executor-process", "executor")
    authz = start_authz(data_dir)
    executor = None
    app = SubscriptionApp()  # a real page for the fuzz's sessions: refs to act on
    app.start()
    started = time.monotonic()
    try:
        executor = start_executor(data_dir, authz.address, executor_token)
        world = prepare_world(data_dir, authz.address, executor.address)
        world.start_urls = [app.url + "/", "about:blank"]
        fuzzer = Fuzzer(world)
        warm = max(1, requests // 10)
        fuzzer.run(warm)
        base = {"authz": rss_kb(authz.proc.pid), "executor": rss_kb(executor.proc.pid)}

        def progress(sent: int) -> None:
            if not quiet and sent % 500 == 0:
                print(f"  {sent} requests sent", file=sys.stderr, flush=True)

        stats = fuzzer.run(requests - warm, on_progress=progress)
        end = {"authz": rss_kb(authz.proc.pid), "executor": rss_kb(executor.proc.pid)}
        fuzzer.close()
        crashes = [p.name for p in (authz, executor) if p.proc.poll() is not None]
    finally:
        if executor is not None:
            executor.stop()
        authz.stop()
        app.stop()
    verify = subprocess.run(
        [sys.executable, "-m", "handrail", "ledger", "verify", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    growth = {k: round(100.0 * (end[k] - base[k]) / base[k], 1) if base[k] else None for k in base}
    if not quiet:
        print(f"status codes per RPC ({stats.sent} requests):")
        print(stats.table())
        for line in stats.internal[:20]:
            print(f"  INTERNAL/UNKNOWN: {line}")
        for line in stats.wrong_allows[:20]:
            print(f"  WRONG ALLOW: {line}")
        print(f"ledger verify: {verify.stdout.strip() or verify.stderr.strip()}")
    return {
        "requests": stats.sent,
        "seconds": round(time.monotonic() - started, 1),
        "rpcs_covered": len(stats.codes),
        "crashes": len(crashes),
        "wrong_allows": len(stats.wrong_allows),
        "internal_or_unknown": len(stats.internal),
        "rss_kb_after_warmup": base,
        "rss_kb_end": end,
        "rss_growth_pct": growth,
        "ledger_verify_ok": verify.returncode == 0,
        "codes": {rpc: dict(c) for rpc, c in sorted(stats.codes.items())},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=3000, help="how many requests (default 3000)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the data dir here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="handrail-fuzz-") as tmp:
        figures = run(args.requests, args.keep or Path(tmp) / "data")
    growth = [g for g in figures["rss_growth_pct"].values() if g is not None]  # type: ignore[attr-defined]
    targets = {
        "requests_min": 3000,
        "crashes": 0,
        "wrong_allows": 0,
        "internal_or_unknown": 0,
        "rss_growth_pct_max": 20,
        "ledger_verify_ok": True,
    }
    met = (
        figures["requests"] >= targets["requests_min"]  # type: ignore[operator]
        and figures["crashes"] == 0
        and figures["wrong_allows"] == 0
        and figures["internal_or_unknown"] == 0
        and all(g < 20 for g in growth)
        and figures["ledger_verify_ok"] is True
    )
    summary = {k: v for k, v in figures.items() if k != "codes"}
    print(json.dumps({"bench": "fuzz", **summary, "targets": targets, "met": met}))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
