"""``handrail console``: the operator console's web server."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import grpc

from handrail import HandrailError
from handrail._args import executor_roots, executor_tls, seconds, sidecar_roots, sidecar_tls
from handrail.authz import parse_addresses
from handrail.console._config import DEFAULT_LISTEN, ConsoleConfig
from handrail.console._serve import serve_forever

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add ``handrail console`` to the top-level parser."""
    p = sub.add_parser("console", help="the operator console: watch, approve and take the wheel in a browser")
    p.add_argument(
        "--authz",
        default=os.environ.get("HANDRAIL_AUTHZ", "127.0.0.1:7700"),
        help="the sidecar's HOST:PORT, or its replicas' as a comma-separated list "
        "(env HANDRAIL_AUTHZ; default %(default)s)",
    )
    p.add_argument(
        "--executor",
        action="append",
        default=None,
        metavar="HOST:PORT",
        help="an executor to show (repeatable; default 127.0.0.1:7701)",
    )
    p.add_argument("--listen", default=DEFAULT_LISTEN, help="HOST:PORT to serve on (default %(default)s)")
    p.add_argument("--tls-cert", default="", help="PEM certificate chain: serve HTTPS")
    p.add_argument("--tls-key", default="", help="PEM private key of --tls-cert")
    sidecar_tls(p, "--authz-ca", "--authz-server-name")
    executor_tls(p)
    p.add_argument(
        "--idle-timeout",
        type=seconds("--idle-timeout"),
        default=1800,
        metavar="S",
        help="sign-ins end after S idle seconds",
    )
    p.add_argument("--allowed-host", action="append", default=[], help="a Host header to answer (repeatable)")
    p.add_argument(
        "--start-timeout",
        type=seconds("--start-timeout"),
        default=10,
        metavar="S",
        help="wait up to S seconds for the sidecar and the executors to answer before serving (default %(default)s)",
    )
    p.set_defaults(func=_main)


def unreachable(config: ConsoleConfig, timeout_s: float) -> str:
    """The first back end (sidecar, then executors) that does not answer within
    ``timeout_s`` in all, as a one-line reason; empty when every one answers. The sidecar
    answers when any of its replicas does (``--authz a:7700,b:7700``): the console's
    client balances over them and fails over.

    Raises:
        InvalidArgumentError: ``--authz`` is not a list of HOST:PORT.
    """
    deadline = time.monotonic() + timeout_s
    replicas = parse_addresses(config.authz)
    sidecar = (config.authz_root_certificates, config.authz_server_name)
    backends = [("the authz sidecar", replicas, sidecar)]
    executor = (config.executor_root_certificates, config.executor_server_name)
    backends += [("the executor", (address,), executor) for address in config.executors]
    for what, addresses, (roots, server_name) in backends:
        if not _any_ready(addresses, roots, server_name, deadline):
            where = f"at {addresses[0]}" if len(addresses) == 1 else f"at any of {', '.join(addresses)}"
            return f"cannot reach {what} {where} (is it running?)"
    return ""


def _any_ready(addresses: Sequence[str], roots: bytes | None, server_name: str, deadline: float) -> bool:
    """Whether a channel to any of ``addresses`` is ready before ``deadline`` (TLS when
    ``roots``, checking ``server_name`` in the certificate when given)."""
    credentials = None if roots is None else grpc.ssl_channel_credentials(root_certificates=roots)
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
    channels = [
        grpc.insecure_channel(a) if credentials is None else grpc.secure_channel(a, credentials, options)
        for a in addresses
    ]
    ready = [grpc.channel_ready_future(c) for c in channels]
    try:
        while not any(f.done() for f in ready):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True
    finally:
        for f in ready:
            f.cancel()
        for c in channels:
            c.close()


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if bool(args.tls_cert) != bool(args.tls_key):
        print("handrail console: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    try:
        roots, _ = sidecar_roots(args.authz_ca, args.authz_server_name, "--authz-ca", "--authz-server-name")
        executor_ca, _ = executor_roots(args.executor_ca, args.executor_server_name)
    except ValueError as exc:
        print(f"handrail console: {exc}", file=sys.stderr)
        return 2
    try:
        config = ConsoleConfig(
            authz=args.authz,
            executors=tuple(args.executor or ["127.0.0.1:7701"]),
            listen=args.listen,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            idle_s=args.idle_timeout,
            allowed_hosts=tuple(args.allowed_host),
            authz_root_certificates=roots,
            authz_server_name=args.authz_server_name,
            executor_root_certificates=executor_ca,
            executor_server_name=args.executor_server_name,
        )
        problem = unreachable(config, args.start_timeout)
        if problem:
            print(f"handrail console: {problem}", file=sys.stderr)
            return 1
        return serve_forever(config)
    except (OSError, ValueError, HandrailError) as exc:
        print(f"handrail console: cannot start: {exc}", file=sys.stderr)
        return 1
