"""Command-line commands of the authz package.

``handrail authz serve`` runs the sidecar; ``handrail authz principal add|list`` edit the store
file directly (file access is admin). The operator commands (``grant``, ``revoke``,
``grants``, ``takeover``, ``handback``, ``lease``) talk to a running sidecar.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from handrail.authz._client import AuthzClient
from handrail.authz._core import GrantInfo, LeaseInfo
from handrail.authz._errors import AuthzError, PolicyError
from handrail.authz._policies import DEFAULT_POLICIES_DIR

DEFAULT_LISTEN = "127.0.0.1:7700"
DEFAULT_DATA_DIR = "./handrail-data"

_Subparsers = Any  # argparse's private _SubParsersAction


def _data_dir_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("HANDRAIL_DATA_DIR", DEFAULT_DATA_DIR),
        help="directory of authz.sqlite (env HANDRAIL_DATA_DIR; default %(default)s)",
    )


def _remote_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--authz",
        default=os.environ.get("HANDRAIL_AUTHZ", DEFAULT_LISTEN),
        help="address of the authz sidecar (env HANDRAIL_AUTHZ; default %(default)s)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("HANDRAIL_TOKEN", ""),
        help="your bearer token (env HANDRAIL_TOKEN)",
    )


def register(subparsers: _Subparsers) -> None:
    """Add the authz commands to the ``handrail`` command line."""
    authz = subparsers.add_parser("authz", help="the authorization sidecar")
    authz_sub = authz.add_subparsers(dest="authz_command", required=True, metavar="COMMAND")

    serve = authz_sub.add_parser("serve", help="run the authz sidecar")
    _data_dir_arg(serve)
    serve.add_argument(
        "--listen", default=DEFAULT_LISTEN, help="HOST:PORT to bind (default %(default)s)"
    )
    serve.add_argument(
        "--policies",
        default=str(DEFAULT_POLICIES_DIR),
        help="directory of *.cedar policies and schema.cedarschema (default: shipped)",
    )
    serve.add_argument(
        "--durable-decisions",
        action="store_true",
        help="fsync every decision-log insert (slower checks)",
    )
    serve.set_defaults(func=cmd_serve)

    principal = authz_sub.add_parser("principal", help="manage principals (direct file access)")
    principal_sub = principal.add_subparsers(
        dest="principal_command", required=True, metavar="COMMAND"
    )
    add = principal_sub.add_parser("add", help="create a principal and print its token")
    add.add_argument("name")
    add.add_argument("--role", required=True, choices=["agent", "operator", "executor", "admin"])
    add.add_argument("--token", default=None, help="the token to use (default: generated)")
    _data_dir_arg(add)
    add.set_defaults(func=cmd_principal_add)
    lst = principal_sub.add_parser("list", help="list principals")
    _data_dir_arg(lst)
    lst.set_defaults(func=cmd_principal_list)

    grant = subparsers.add_parser("grant", help="grant an agent verbs on a target")
    grant.add_argument("--principal", required=True, help="the agent")
    grant.add_argument("--target", required=True, help="the controlled session")
    grant.add_argument("--verbs", required=True, help="comma-separated, e.g. submit,input")
    grant.add_argument(
        "--origin", action="append", default=[], help="allowed origin (repeatable; none = any)"
    )
    grant.add_argument("--ttl", type=float, default=0, help="lifetime in seconds (0 = no expiry)")
    grant.add_argument("--note", default="", help="why")
    _remote_args(grant)
    grant.set_defaults(func=_remote(cmd_grant))

    revoke = subparsers.add_parser("revoke", help="revoke a grant")
    revoke.add_argument("grant_id")
    _remote_args(revoke)
    revoke.set_defaults(func=_remote(cmd_revoke))

    grants = subparsers.add_parser("grants", help="list grants")
    grants.add_argument("--principal", default="")
    grants.add_argument("--target", default="")
    grants.add_argument("--all", action="store_true", help="include revoked and expired")
    _remote_args(grants)
    grants.set_defaults(func=_remote(cmd_grants))

    takeover = subparsers.add_parser("takeover", help="take human control of a target")
    takeover.add_argument("target")
    takeover.add_argument("--note", default="")
    takeover.add_argument("--ttl", type=float, default=0, help="seconds (default 600)")
    _remote_args(takeover)
    takeover.set_defaults(func=_remote(cmd_takeover))

    handback = subparsers.add_parser("handback", help="hand a target's lease back")
    handback.add_argument("target")
    handback.add_argument("--next", default="", help="the only agent that may acquire next")
    _remote_args(handback)
    handback.set_defaults(func=_remote(cmd_handback))

    lease = subparsers.add_parser("lease", help="show a target's control lease")
    lease.add_argument("target")
    _remote_args(lease)
    lease.set_defaults(func=_remote(cmd_lease))


def main(argv: Sequence[str] | None = None) -> int:
    """Run only the authz commands (``python -c`` use when the full CLI is unavailable)."""
    parser = argparse.ArgumentParser(prog="handrail")
    register(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


# --- serve and principals ---------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    """``handrail authz serve``: run until SIGTERM or SIGINT."""
    from handrail.authz._service import serve

    try:
        server, port = serve(
            args.data_dir, args.listen, args.policies, durable_decisions=args.durable_decisions
        )
    except PolicyError as exc:
        print(f"handrail-authz: policy error: {exc}", file=sys.stderr)
        return 2
    except (AuthzError, RuntimeError, OSError) as exc:
        print(f"handrail-authz: cannot start: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    host = args.listen.rsplit(":", 1)[0]
    print(f"handrail-authz listening on {host}:{port}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop(grace=2.0).wait()
        server.store.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def cmd_principal_add(args: argparse.Namespace) -> int:
    """``handrail authz principal add``: print the new principal's token."""
    from handrail.authz._store import Store

    try:
        store = Store.in_dir(args.data_dir)
        try:
            token = store.add_principal(args.name, args.role, args.token)
        finally:
            store.close()
    except AuthzError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(token)
    return 0


def cmd_principal_list(args: argparse.Namespace) -> int:
    """``handrail authz principal list``."""
    from handrail.authz._store import Store

    store = Store.in_dir(args.data_dir)
    try:
        for name, role, created in store.list_principals():
            print(f"{name}\t{role}\t{_when(created)}")
    finally:
        store.close()
    return 0


# --- operator commands ------------------------------------------------------------------------


def _remote(
    command: Callable[[AuthzClient, argparse.Namespace], None],
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        if not args.token:
            print("error: no token (pass --token or set HANDRAIL_TOKEN)", file=sys.stderr)
            return 1
        try:
            with AuthzClient(args.authz, args.token, timeout_s=5.0) as client:
                command(client, args)
        except AuthzError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0

    return run


def _when(ms: int) -> str:
    if not ms:
        return "never"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _show_grant(grant: GrantInfo, now_ms: int) -> str:
    state = "revoked" if grant.revoked else ("active" if grant.is_active(now_ms) else "expired")
    return (
        f"{grant.grant_id}  {state:7}  {grant.principal} on {grant.target}: "
        f"{','.join(grant.verbs)} @ {', '.join(grant.origins) or 'any origin'}"
        f"  expires {_when(grant.expires_at_ms)}  by {grant.granted_by}"
        + (f"  ({grant.note})" if grant.note else "")
    )


def _show_lease(lease: LeaseInfo) -> str:
    if not lease.holder_kind:
        text = f"{lease.target}: free (epoch {lease.epoch})"
    else:
        text = (
            f"{lease.target}: held by {lease.holder_kind} {lease.holder} (epoch {lease.epoch},"
            f" until {_when(lease.expires_at_ms)})"
        )
    if lease.next_holder:
        text += f"; reserved for {lease.next_holder}"
    return text


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def cmd_grant(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail grant``: print the new grant's id."""
    verbs = [v.strip().lower() for v in args.verbs.split(",") if v.strip()]
    expires = _now_ms() + int(args.ttl * 1000) if args.ttl > 0 else 0
    grant = client.grant(args.principal, args.target, verbs, args.origin, expires, args.note)
    print(grant.grant_id)


def cmd_revoke(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail revoke``."""
    grant = client.revoke(args.grant_id)
    print(f"revoked {grant.grant_id}")


def cmd_grants(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail grants``."""
    grants = client.list_grants(args.principal, args.target, include_inactive=args.all)
    now = _now_ms()
    for grant in grants:
        print(_show_grant(grant, now))
    if not grants:
        print("no grants")


def cmd_takeover(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail takeover``."""
    lease = client.take_over(args.target, int(args.ttl * 1000), args.note)
    print(_show_lease(lease))


def cmd_handback(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail handback``: reads the current epoch, then hands back at it."""
    current = client.get_lease(args.target)
    lease = client.hand_back(args.target, current.epoch, args.next)
    print(_show_lease(lease))


def cmd_lease(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail lease``."""
    print(_show_lease(client.get_lease(args.target)))
