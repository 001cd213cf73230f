"""``handrail executor serve``: the executor as its own process."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from handrail._args import served_pem, server_tls, sidecar_roots, sidecar_tls
from handrail._errors import HandrailError
from handrail._rpc import bound_address

DEFAULT_LISTEN = "127.0.0.1:7701"


def register(sub: Any) -> None:
    """Add the ``executor`` command group to the top-level parser."""
    group = sub.add_parser("executor", help="the executor service agents call")
    commands = group.add_subparsers(dest="executor_command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve the executor over gRPC")
    serve.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        help=f"HOST:PORT (default {DEFAULT_LISTEN}; port 0 picks one)",
    )
    server_tls(serve, cert_env="HANDRAIL_EXECUTOR_TLS_CERT", key_env="HANDRAIL_EXECUTOR_TLS_KEY", tokens="agents'")
    serve.add_argument(
        "--authz",
        default=os.environ.get("HANDRAIL_AUTHZ", "127.0.0.1:7700"),
        help="the authz sidecar's address, or its replicas' as a comma-separated list: calls are "
        "balanced and fail over (env HANDRAIL_AUTHZ)",
    )
    serve.add_argument(
        "--token",
        default=os.environ.get("HANDRAIL_TOKEN", ""),
        help="this executor's bearer token at the sidecar (env HANDRAIL_TOKEN)",
    )
    sidecar_tls(serve)
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("HANDRAIL_DATA_DIR", "handrail-data")),
        help="where the ledger lives (env HANDRAIL_DATA_DIR)",
    )
    serve.add_argument(
        "--ledger",
        default=os.environ.get("HANDRAIL_LEDGER", ""),
        metavar="postgresql://...",
        help="append to this executor's chain in a PostgreSQL ledger instead of <data-dir>/ledger.sqlite "
        "(env HANDRAIL_LEDGER; the head file stays in --data-dir)",
    )
    serve.add_argument(
        "--executor-id",
        default=os.environ.get("HANDRAIL_EXECUTOR_ID", "") or socket.gethostname(),
        help="this executor's chain in a PostgreSQL ledger (env HANDRAIL_EXECUTOR_ID; default the host name)",
    )
    serve.add_argument(
        "--chromium",
        default=None,
        help="Chromium executable (env HANDRAIL_CHROMIUM, default /usr/bin/chromium)",
    )
    serve.add_argument("--lease-ttl-ms", type=int, default=30_000, help="lease TTL asked for each session")
    serve.add_argument(
        "--upload-dir",
        type=Path,
        default=None,
        help="the only directory files may be uploaded from (default: uploads are off)",
    )
    serve.add_argument(
        "--playwright-clicks",
        action="store_true",
        help="send every click through Playwright's click (its two-frame stability wait) instead of "
        "the executor's own guarded pointer (docs/browser.md)",
    )
    serve.add_argument(
        "--fault",
        default=os.environ.get("HANDRAIL_FAULT", ""),
        help="inject a fault: POINT[:IDEMPOTENCY_KEY][:sleep=MS], POINT one of before-intent, "
        "after-intent, after-dispatch, after-result (env HANDRAIL_FAULT; for tests)",
    )
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    if not args.token:
        print("handrail executor serve: --token or HANDRAIL_TOKEN is required", file=sys.stderr)
        return 2
    if args.ledger and not args.ledger.startswith(("postgresql://", "postgres://")):
        print("handrail executor serve: --ledger must be a postgresql:// URL", file=sys.stderr)
        return 2
    try:
        args.authz_roots, args.authz_server_name = sidecar_roots(args.tls_ca, args.tls_server_name)
        args.tls = served_pem(args.tls_cert, args.tls_key, args.plaintext, args.listen)
    except ValueError as exc:
        print(f"handrail executor serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return asyncio.run(_serve_async(args))
    except (HandrailError, ValueError) as exc:  # an operator's mistake: one line, no traceback
        print(f"handrail executor serve: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"handrail executor serve: {exc.strerror or exc}", file=sys.stderr)
        return 1


async def _serve_async(args: argparse.Namespace) -> int:
    from handrail.executor._faults import Fault
    from handrail.executor._service import start_server

    fault = Fault.parse(args.fault) if args.fault else None
    running = await start_server(
        listen=args.listen,
        authz_address=args.authz,
        token=args.token,
        authz_root_certificates=args.authz_roots,
        authz_server_name=args.authz_server_name,
        tls=args.tls,
        data_dir=args.data_dir,
        ledger=args.ledger or None,
        executor_id=args.executor_id,
        chromium=args.chromium,
        lease_ttl_ms=args.lease_ttl_ms,
        upload_dir=args.upload_dir,
        playwright_clicks=args.playwright_clicks,
        fault=fault,
    )
    print(f"handrail-executor listening on {bound_address(args.listen, running.port)}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await running.stop()
    return 0
