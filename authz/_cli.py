"""Command-line commands of the authz package.

``handrail authz serve`` runs the sidecar; ``handrail authz principal add|list`` edit the store
file directly (file access is admin); ``handrail authz policies`` checks a policy directory
locally. The operator commands (``grant``, ``revoke``, ``grants``, ``close-task``,
``takeover``, ``handback``, ``lease``, ``expire-lease``, ``approve``, ``deny``,
``approvals``, ``watch``, ``authz reload``) talk to a running sidecar; ``authz explain`` and
``authz decisions`` do too, or read the store file with ``--data-dir``. docs/authz.md is the
operator's guide.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from handrail._vocabulary import VERBS
from handrail.authz._client import AuthzClient
from handrail.authz._errors import AuthzError, PolicyError
from handrail.authz._explain import explain_text, one_line, parse_since
from handrail.authz._models import (
    ROLES,
    ApprovalInfo,
    DecisionRecord,
    GrantInfo,
    LeaseInfo,
    WatchEventInfo,
)
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
    parser.add_argument(
        "--tls-ca",
        default=os.environ.get("HANDRAIL_AUTHZ_CA", ""),
        help="PEM CA file: talk TLS to the sidecar and trust this CA (env HANDRAIL_AUTHZ_CA)",
    )
    parser.add_argument(
        "--tls-server-name",
        default=os.environ.get("HANDRAIL_AUTHZ_SERVER_NAME", ""),
        help="the name in the sidecar's certificate, if not the host of --authz",
    )


def register(subparsers: _Subparsers) -> None:
    """Add the authz commands to the ``handrail`` command line."""
    authz = subparsers.add_parser("authz", help="the authorization sidecar")
    authz_sub = authz.add_subparsers(dest="authz_command", required=True, metavar="COMMAND")

    serve = authz_sub.add_parser("serve", help="run the authz sidecar")
    _data_dir_arg(serve)
    serve.add_argument("--listen", default=DEFAULT_LISTEN, help="HOST:PORT to bind (default %(default)s)")
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
    serve.add_argument(
        "--shadow-policies",
        default=None,
        metavar="DIR",
        help="a second policy set evaluated on every check and logged as 'would deny' only",
    )
    serve.add_argument(
        "--approval-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="deadline of an approval unless a grant or policy sets one (default %(default)s)",
    )
    serve.add_argument("--tls-cert", default=None, help="PEM certificate chain: serve TLS")
    serve.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert")
    serve.add_argument("--log-level", default="INFO", help="logging level on stderr (default %(default)s)")
    serve.set_defaults(func=cmd_serve)

    policies = authz_sub.add_parser("policies", help="load and validate a policy directory locally; list its policies")
    policies.add_argument("--dir", default=str(DEFAULT_POLICIES_DIR), help="policies directory (default: shipped)")
    policies.set_defaults(func=cmd_policies)

    reload = authz_sub.add_parser("reload", help="make the sidecar re-read its policies")
    _remote_args(reload)
    reload.set_defaults(func=_remote(cmd_reload))

    explain = authz_sub.add_parser("explain", help="explain one decision in plain words")
    explain.add_argument("decision_id")
    _local_or_remote_args(explain)
    explain.set_defaults(func=cmd_explain)

    decisions = authz_sub.add_parser("decisions", help="list logged decisions, newest first")
    decisions.add_argument("--principal", default="", help="the agent")
    decisions.add_argument("--target", default="")
    decisions.add_argument("--since", default="", help="10m, 2h, 1d or an ISO time")
    decisions.add_argument("--reason", default="", help="e.g. POLICY_FORBID")
    decisions.add_argument("--limit", type=int, default=50)
    _local_or_remote_args(decisions)
    decisions.set_defaults(func=cmd_decisions)

    principal = authz_sub.add_parser("principal", help="manage principals (direct file access)")
    principal_sub = principal.add_subparsers(dest="principal_command", required=True, metavar="COMMAND")
    add = principal_sub.add_parser("add", help="create a principal and print its token")
    add.add_argument("name")
    add.add_argument("--role", required=True, choices=ROLES)
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
    grant.add_argument("--origin", action="append", default=[], help="allowed origin (repeatable; none = any)")
    grant.add_argument("--ttl", type=float, default=0, help="lifetime in seconds (0 = no expiry)")
    grant.add_argument("--note", default="", help="why")
    for flag, what in (
        ("--path", "URL path glob, e.g. '/account/*'"),
        ("--role", "element role pattern, e.g. button"),
        ("--name", "element accessible-name pattern, e.g. 'Pause*'"),
        ("--window-class", "desktop window class pattern"),
        ("--window-title", "desktop window title pattern"),
    ):
        grant.add_argument(flag, action="append", default=[], help=f"{what} (repeatable)")
    grant.add_argument("--allow-password-input", action="store_true", help="may type into password fields")
    grant.add_argument("--single-use", action="store_true", help="used up by the first allow")
    grant.add_argument("--task", default="", help="bind to a task; close-task ends it")
    grant.add_argument("--require-approval", default="", help="comma-separated verbs that need approval")
    grant.add_argument("--approval-timeout", type=float, default=0, help="seconds an approval may wait")
    _remote_args(grant)
    grant.set_defaults(func=_remote(cmd_grant))

    close_task = subparsers.add_parser("close-task", help="end every grant bound to a task")
    close_task.add_argument("task_id")
    _remote_args(close_task)
    close_task.set_defaults(func=_remote(cmd_close_task))

    approve = subparsers.add_parser("approve", help="approve a pending action")
    approve.add_argument("approval_id")
    approve.add_argument("--note", default="")
    _remote_args(approve)
    approve.set_defaults(func=_remote(cmd_approve))

    deny = subparsers.add_parser("deny", help="deny a pending action")
    deny.add_argument("approval_id")
    deny.add_argument("--note", default="")
    _remote_args(deny)
    deny.set_defaults(func=_remote(cmd_deny))

    approvals = subparsers.add_parser("approvals", help="list approvals, newest first")
    approvals.add_argument("--status", default="", help="pending, approved, denied, expired or used (default any)")
    approvals.add_argument("--principal", default="")
    approvals.add_argument("--target", default="")
    approvals.add_argument("--limit", type=int, default=100)
    _remote_args(approvals)
    approvals.set_defaults(func=_remote(cmd_approvals))

    watch = subparsers.add_parser("watch", help="print lease, grant and approval changes")
    watch.add_argument("targets", nargs="*", help="targets to watch (default: all)")
    watch.add_argument("--since-seq", type=int, default=0)
    watch.add_argument("--count", type=int, default=0, help="stop after this many events")
    _remote_args(watch)
    watch.set_defaults(func=_remote(cmd_watch, timeout_s=None))

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

    expire = subparsers.add_parser("expire-lease", help="make a target's lease lapse (admin)")
    expire.add_argument("target")
    _remote_args(expire)
    expire.set_defaults(func=_remote(cmd_expire_lease))


def _local_or_remote_args(parser: argparse.ArgumentParser) -> None:
    _remote_args(parser)
    parser.add_argument(
        "--data-dir",
        default=None,
        help="read authz.sqlite in this directory instead of asking the sidecar",
    )
    parser.add_argument(
        "--policies",
        default=str(DEFAULT_POLICIES_DIR),
        help="with --data-dir: the policies, to say where a policy lives",
    )


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

    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        server, port = serve(
            args.data_dir,
            args.listen,
            args.policies,
            durable_decisions=args.durable_decisions,
            shadow_policies_dir=args.shadow_policies,
            approval_timeout_ms=int(args.approval_timeout * 1000),
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
        )
    except PolicyError as exc:
        print(f"handrail-authz: policy error: {exc}", file=sys.stderr)
        return 2
    except (AuthzError, RuntimeError, OSError, ValueError) as exc:
        print(f"handrail-authz: cannot start: {exc}", file=sys.stderr)
        return 1
    # What is loaded now (grant and lease indexes, policies, gRPC) lives as long as the
    # process: keep it out of the collector's full passes, which would otherwise walk it all.
    gc.collect()
    gc.freeze()
    stop = threading.Event()
    reload = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def on_hup(signum: int, frame: FrameType | None) -> None:
        reload.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hup)
    host = args.listen.rsplit(":", 1)[0]
    print(f"handrail-authz listening on {host}:{port}", flush=True)
    try:
        while not stop.wait(0.2):
            if reload.is_set():
                reload.clear()
                server.reload_policies()  # logs the outcome; a bad set keeps the old one
    finally:
        server.stop(grace=2.0).wait()
        server.store.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def cmd_principal_add(args: argparse.Namespace) -> int:
    """``handrail authz principal add``: print the new principal's token."""
    from handrail.authz._sqlite import Store

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
    from handrail.authz._sqlite import Store

    store = Store.in_dir(args.data_dir)
    try:
        for name, role, created in store.list_principals():
            print(f"{name}\t{role}\t{_when(created)}")
    finally:
        store.close()
    return 0


# --- operator commands ------------------------------------------------------------------------


def _client(args: argparse.Namespace, timeout_s: float | None = 5.0) -> AuthzClient:
    ca = Path(args.tls_ca).read_bytes() if args.tls_ca else None
    return AuthzClient(
        args.authz,
        args.token,
        timeout_s=timeout_s if timeout_s is not None else 5.0,
        root_certificates=ca,
        server_name=args.tls_server_name or None,
    )


def _remote(
    command: Callable[[AuthzClient, argparse.Namespace], None],
    timeout_s: float | None = 5.0,
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        if not args.token:
            print("error: no token (pass --token or set HANDRAIL_TOKEN)", file=sys.stderr)
            return 1
        try:
            with _client(args, timeout_s) as client:
                command(client, args)
        except (AuthzError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        return 0

    return run


def _when(ms: int) -> str:
    if not ms:
        return "never"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _show_grant(grant: GrantInfo, now_ms: int) -> str:
    state = grant.state(now_ms)
    extras = []
    for label, values in (
        ("paths", grant.path_globs),
        ("roles", grant.role_patterns),
        ("names", grant.name_patterns),
        ("window classes", grant.window_class_patterns),
        ("window titles", grant.window_title_patterns),
        ("approval for", grant.require_approval_verbs),
    ):
        if values:
            extras.append(f"{label} {','.join(values)}")
    for flag, label in (
        (grant.single_use, "single use"),
        (grant.allow_password_input, "password input"),
        (bool(grant.task_id), f"task {grant.task_id}"),
    ):
        if flag:
            extras.append(label)
    return (
        f"{grant.grant_id}  {state:9}  {grant.principal} on {grant.target}: "
        f"{','.join(grant.verbs)} @ {', '.join(grant.origins) or 'any origin'}"
        + (f"  [{'; '.join(extras)}]" if extras else "")
        + f"  expires {_when(grant.expires_at_ms)}  by {grant.granted_by}"
        + (f"  ({grant.note})" if grant.note else "")
    )


def _show_approval(a: ApprovalInfo) -> str:
    what = a.element_name or a.window_title or a.url
    text = (
        f"{a.approval_id}  {a.status:8}  {a.principal} {a.verb} {what!r} on {a.target}"
        f" (epoch {a.lease_epoch})  deadline {_when(a.deadline_ms)}"
    )
    if a.policies:
        text += f"  asked by {','.join(a.policies)}"
    if a.decided_by:
        text += f"  decided by {a.decided_by}" + (f": {a.note}" if a.note else "")
    return text


def _show_event(e: WatchEventInfo) -> str:
    head = f"#{e.seq} {_when(e.at_ms)} {e.kind} {e.change}"
    if e.lease is not None:
        return f"{head}  {_show_lease(e.lease)}"
    if e.grant is not None:
        return f"{head}  {_show_grant(e.grant, e.at_ms)}"
    if e.approval is not None:
        return f"{head}  {_show_approval(e.approval)}"
    return head


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


def _verbs(text: str) -> list[str]:
    return [v.strip().lower() for v in text.split(",") if v.strip()]


def cmd_grant(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail grant``: print the new grant's id."""
    expires = _now_ms() + int(args.ttl * 1000) if args.ttl > 0 else 0
    grant = client.grant(
        args.principal,
        args.target,
        _verbs(args.verbs),
        args.origin,
        expires,
        args.note,
        path_globs=args.path,
        role_patterns=args.role,
        name_patterns=args.name,
        window_class_patterns=args.window_class,
        window_title_patterns=args.window_title,
        allow_password_input=args.allow_password_input,
        single_use=args.single_use,
        task_id=args.task,
        require_approval_verbs=_verbs(args.require_approval),
        approval_timeout_ms=int(args.approval_timeout * 1000),
    )
    print(grant.grant_id)


def cmd_close_task(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail close-task``."""
    grants = client.close_task(args.task_id)
    print(f"task {args.task_id} closed: {len(grants)} grant(s) ended")
    for grant in grants:
        print(f"  {grant.grant_id}")


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


def cmd_expire_lease(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail expire-lease`` (admin)."""
    print(_show_lease(client.expire_lease(args.target)))


def cmd_approve(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail approve``."""
    print(_show_approval(client.approve(args.approval_id, args.note)))


def cmd_deny(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail deny``."""
    print(_show_approval(client.deny(args.approval_id, args.note)))


def cmd_approvals(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail approvals``."""
    approvals = client.list_approvals(args.status, args.principal, args.target, args.limit)
    for approval in approvals:
        print(_show_approval(approval))
    if not approvals:
        print("no approvals")


def cmd_watch(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail watch``: one line per change until interrupted (or ``--count``)."""
    seen = 0
    events = client.watch(args.targets, args.since_seq)
    try:
        for event in events:
            print(_show_event(event), flush=True)
            seen += 1
            if args.count and seen >= args.count:
                break
    finally:
        events.close()


def cmd_reload(client: AuthzClient, args: argparse.Namespace) -> None:
    """``handrail authz reload``."""
    enforced, shadow = client.reload_policies()
    print(f"reloaded: {len(enforced)} policies ({', '.join(enforced)})")
    if shadow:
        print(f"shadow: {len(shadow)} policies ({', '.join(shadow)})")


def cmd_policies(args: argparse.Namespace) -> int:
    """``handrail authz policies``: validate a directory and list its policies."""
    from handrail.authz._policies import PolicyEngine

    try:
        engine = PolicyEngine.load(args.dir)
    except PolicyError as exc:
        print(f"policy error: {exc}", file=sys.stderr)
        return 2
    for info in engine.policies:
        verbs = "any verb" if len(info.verbs) == len(VERBS) else ",".join(sorted(info.verbs))
        mode = "  @approval" if info.approval else ""
        print(f"{info.policy_id}  {info.file}:{info.line}  ({verbs}){mode}")
    print(f"{len(engine.policies)} policies, valid")
    return 0


def _print_records(records: list[DecisionRecord]) -> None:
    for record in records:
        print(one_line(record))
    if not records:
        print("no decisions")


def cmd_explain(args: argparse.Namespace) -> int:
    """``handrail authz explain``: over the RPC, or from the file with ``--data-dir``."""
    if args.data_dir:
        from handrail.authz._policies import PolicyEngine
        from handrail.authz._sqlite import SqliteStore

        try:
            with SqliteStore.in_dir(args.data_dir) as store:
                record = store.get_decision(args.decision_id)
                grants = [store.get_grant(g) for g in record.grants_considered]
            try:
                engine: PolicyEngine | None = PolicyEngine.load(args.policies)
            except PolicyError:
                engine = None
            print(explain_text(record, grants, engine))
        except AuthzError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0

    def remote(client: AuthzClient, args: argparse.Namespace) -> None:
        print(client.explain_decision(args.decision_id)[1])

    return _remote(remote)(args)


def cmd_decisions(args: argparse.Namespace) -> int:
    """``handrail authz decisions``: over the RPC, or from the file with ``--data-dir``."""
    try:
        since = parse_since(args.since, _now_ms()) if args.since else 0
    except AuthzError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    reason = args.reason.upper()
    if args.data_dir:
        from handrail.authz._sqlite import SqliteStore

        try:
            with SqliteStore.in_dir(args.data_dir) as store:
                records = store.list_decisions(args.principal, args.target, reason, since, args.limit)
        except AuthzError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        _print_records(records)
        return 0

    def remote(client: AuthzClient, args: argparse.Namespace) -> None:
        _print_records(client.list_decisions(args.principal, args.target, reason, since, args.limit))

    return _remote(remote)(args)
