"""``handrail mcp``: serve the MCP tools over stdio (default) or streamable HTTP."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

import anyio
import grpc

from handrail._args import executor_roots, executor_tls, seconds

from ._bridge import McpSettings
from ._tools import build_server

__all__ = ["register", "run", "unreachable"]


def register(sub: Any) -> None:
    """Add the ``mcp`` command to the top-level parser."""
    cmd = sub.add_parser(
        "mcp",
        help="an MCP server (Playwright MCP's tools) in front of an executor",
        description="Serve Playwright-MCP-style tools over MCP; every write goes through the executor's guard.",
    )
    env = os.environ.get
    cmd.add_argument(
        "--executor", default=env("HANDRAIL_EXECUTOR", "127.0.0.1:7701"), help="HOST:PORT (env HANDRAIL_EXECUTOR)"
    )
    executor_tls(cmd)
    cmd.add_argument(
        "--token", default=env("HANDRAIL_AGENT_TOKEN", ""), help="the agent's token (env HANDRAIL_AGENT_TOKEN)"
    )
    cmd.add_argument(
        "--target", default=env("HANDRAIL_TARGET", ""), help="lease target, browser:NAME (env HANDRAIL_TARGET)"
    )
    cmd.add_argument(
        "--start-url", default=env("HANDRAIL_START_URL", ""), help="where each session starts (env HANDRAIL_START_URL)"
    )
    cmd.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or streamable HTTP"
    )
    cmd.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on (default 127.0.0.1)")
    cmd.add_argument("--port", type=int, default=8931, help="HTTP: the port (default 8931); the endpoint is /mcp")
    cmd.add_argument(
        "--console-url",
        default=env("HANDRAIL_CONSOLE_URL", ""),
        help="the operator console's base URL: approvals are elicited at URL/approvals/ID (env HANDRAIL_CONSOLE_URL)",
    )
    cmd.add_argument(
        "--approval-wait",
        type=seconds("--approval-wait"),
        default=120.0,
        metavar="SECONDS",
        help="how long an action waits for the operator once the user opened the approval page (default 120)",
    )
    cmd.add_argument(
        "--state-key",
        default=env("HANDRAIL_MCP_STATE_KEY", ""),
        metavar="SECRET",
        help="protocol 2026-07-28: the secret (32 characters or more) that seals an approval's request state, "
        "the same on every replica (env HANDRAIL_MCP_STATE_KEY; default: a key of this process's own)",
    )
    cmd.add_argument(
        "--no-description-check",
        action="store_true",
        help="do not require a ref action's element description to contain the element's name",
    )
    cmd.add_argument(
        "--start-timeout",
        type=seconds("--start-timeout"),
        default=10,
        metavar="SECONDS",
        help="wait up to this long for the executor to answer before serving (default %(default)s)",
    )
    cmd.set_defaults(func=run)


def unreachable(
    executor: str, timeout_s: float, root_certificates: bytes | None = None, server_name: str | None = None
) -> str:
    """Why the executor at ``executor`` does not answer within ``timeout_s``; "" when it does.
    With ``root_certificates`` it must answer TLS with a certificate they sign (for
    ``server_name``, if given): one that does not is as unreachable.

    Checked at start, so that a client is not left with a server that fails only at its
    first tool call.
    """
    if root_certificates is None:
        channel = grpc.insecure_channel(executor)
    else:
        credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
        options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
        channel = grpc.secure_channel(executor, credentials, options)
    try:
        grpc.channel_ready_future(channel).result(timeout=max(0.1, timeout_s))
    except grpc.FutureTimeoutError:
        return f"cannot reach the executor at {executor} (is it running?)"
    finally:
        channel.close()
    return ""


def run(args: argparse.Namespace) -> int:
    """Serve until the client goes away (stdio) or the process is stopped (HTTP)."""
    missing = [flag for flag, value in (("--token", args.token), ("--target", args.target)) if not value]
    if missing:
        print(
            f"handrail mcp: {' and '.join(missing)} required (or HANDRAIL_AGENT_TOKEN, HANDRAIL_TARGET)",
            file=sys.stderr,
        )
        return 2
    if not 0 <= args.approval_wait <= 600:
        print("handrail mcp: --approval-wait must be between 0 and 600 seconds", file=sys.stderr)
        return 2
    if args.state_key and len(args.state_key.encode()) < 32:
        print("handrail mcp: --state-key must be 32 characters or more", file=sys.stderr)
        return 2
    try:
        roots, server_name = executor_roots(args.executor_ca, args.executor_server_name)
    except ValueError as exc:
        print(f"handrail mcp: {exc}", file=sys.stderr)
        return 2
    problem = unreachable(args.executor, args.start_timeout, roots, server_name)
    if problem:
        print(f"handrail mcp: {problem}", file=sys.stderr)
        return 1
    settings = McpSettings(
        executor=args.executor,
        token=args.token,
        target=args.target,
        start_url=args.start_url,
        console_url=args.console_url,
        approval_wait_s=args.approval_wait,
        check_descriptions=not args.no_description_check,
        state_key=args.state_key,
        root_certificates=roots,
        server_name=server_name,
    )
    server, bridge = build_server(settings)

    async def serve() -> None:
        try:
            if args.transport == "stdio":
                await server.run_stdio_async()
            else:
                print(f"handrail mcp: streamable HTTP at http://{args.host}:{args.port}/mcp", file=sys.stderr)
                await server.run_streamable_http_async(host=args.host, port=args.port)
        finally:
            with anyio.CancelScope(shield=True):
                await bridge.close()

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve)
    return 0
