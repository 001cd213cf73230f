"""The authz package's command line: its parsers, and which command each one runs.

``handrail authz serve`` runs the sidecar; ``handrail authz principal add|list|revoke|rotate``
edit the store file directly (file access is admin; a running sidecar sees the change on the
very next call); ``handrail authz policies`` checks a policy directory
locally. The operator commands (``grant``, ``revoke``, ``grants``, ``close-task``,
``takeover``, ``handback``, ``lease``, ``expire-lease``, ``approve``, ``deny``,
``approvals``, ``watch``, ``authz reload``) talk to a running sidecar; ``authz explain`` and
``authz decisions`` do too, or read the store file with ``--data-dir``. What each command
does is in :mod:`._cli_commands`; docs/authz.md is the operator's guide.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from handrail._args import seconds, server_tls, sidecar_tls
from handrail.authz._cli_commands import (
    cmd_approvals,
    cmd_approve,
    cmd_close_task,
    cmd_decisions,
    cmd_deny,
    cmd_expire_lease,
    cmd_explain,
    cmd_grant,
    cmd_grants,
    cmd_handback,
    cmd_lease,
    cmd_policies,
    cmd_principal_add,
    cmd_principal_list,
    cmd_principal_revoke,
    cmd_principal_rotate,
    cmd_prune_decisions,
    cmd_reload,
    cmd_revoke,
    cmd_serve,
    cmd_takeover,
    cmd_watch,
    remote,
)
from handrail.authz._models import ROLES
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
    _store_arg(parser)


def _nonempty(option: str) -> Any:
    """An argparse ``type`` refusing the empty string (``--archive "$UNSET"``)."""

    def check(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"{option} needs a file name, not an empty one")
        return value

    return check


def _store_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        default=os.environ.get("HANDRAIL_AUTHZ_STORE", ""),
        metavar="postgresql://...",
        help="a PostgreSQL database instead of authz.sqlite in --data-dir: any number of sidecar "
        "replicas serve one database (env HANDRAIL_AUTHZ_STORE; docs/deploy.md)",
    )


def _remote_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--authz",
        default=os.environ.get("HANDRAIL_AUTHZ", DEFAULT_LISTEN),
        help="address of the authz sidecar, or of its replicas as a comma-separated list "
        "(env HANDRAIL_AUTHZ; default %(default)s)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("HANDRAIL_TOKEN", ""),
        help="your bearer token (env HANDRAIL_TOKEN)",
    )
    sidecar_tls(parser)


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
        type=seconds("--approval-timeout"),
        default=300.0,
        metavar="SECONDS",
        help="deadline of an approval unless a grant or policy sets one (default %(default)s)",
    )
    server_tls(
        serve, cert_env="HANDRAIL_AUTHZ_TLS_CERT", key_env="HANDRAIL_AUTHZ_TLS_KEY", tokens="operators' and executors'"
    )
    serve.add_argument(
        "--console-origin",
        action="append",
        default=None,
        metavar="URL",
        help="an origin of the operator console, which no agent may reach (repeatable; "
        "default $HANDRAIL_CONSOLE_ORIGIN or http://127.0.0.1:7710)",
    )
    serve.add_argument(
        "--cpus",
        default=None,
        metavar="LIST",
        help="keep the sidecar on these CPUs, e.g. 1 or 2-3 (default: anywhere); on a small host "
        "one CPU of its own makes checks faster, see docs/deploy.md",
    )
    serve.add_argument("--log-level", default="INFO", help="logging level on stderr (default %(default)s)")
    serve.set_defaults(func=cmd_serve)

    policies = authz_sub.add_parser("policies", help="load and validate a policy directory locally; list its policies")
    policies.add_argument("--dir", default=str(DEFAULT_POLICIES_DIR), help="policies directory (default: shipped)")
    policies.set_defaults(func=cmd_policies)

    reload = authz_sub.add_parser("reload", help="make the sidecar re-read its policies")
    _remote_args(reload)
    reload.set_defaults(func=remote(cmd_reload))

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

    prune = authz_sub.add_parser(
        "prune-decisions",
        help="delete logged decisions older than a retention window (direct file access)",
        description="Delete the decisions logged before a cutoff, in batches (a sidecar may keep "
        "serving meanwhile). Decisions younger than a day and the newest one are always kept.",
    )
    prune.add_argument(
        "--older-than", required=True, metavar="AGE", help="90d, 2160h or an ISO time such as 2026-01-01T00:00Z"
    )
    prune.add_argument("--dry-run", action="store_true", help="count what would go; delete nothing, write nothing")
    prune.add_argument(
        "--archive",
        metavar="FILE",
        type=_nonempty("--archive"),
        default=None,
        help="append what goes to this JSON-lines file first (synced before each batch is deleted)",
    )
    prune.add_argument(
        "--batch",
        type=int,
        default=0,
        metavar="ROWS",
        help="decisions deleted per transaction (default: 1,000 on SQLite, 10,000 on PostgreSQL)",
    )
    _data_dir_arg(prune)
    prune.set_defaults(func=cmd_prune_decisions)

    principal = authz_sub.add_parser("principal", help="manage principals (direct file access)")
    principal_sub = principal.add_subparsers(dest="principal_command", required=True, metavar="COMMAND")
    add = principal_sub.add_parser("add", help="create a principal and print its token")
    add.add_argument("name")
    add.add_argument("--role", required=True, choices=ROLES)
    add.add_argument("--token", default=None, help="the token to use (default: generated)")
    add.add_argument("--ttl", type=seconds("--ttl"), default=0, help="seconds until the token expires (default: never)")
    _data_dir_arg(add)
    add.set_defaults(func=cmd_principal_add)
    lst = principal_sub.add_parser("list", help="list principals: role, state, expiry")
    _data_dir_arg(lst)
    lst.set_defaults(func=cmd_principal_list)
    revoke = principal_sub.add_parser("revoke", help="revoke a principal: its token fails on the very next call")
    revoke.add_argument("name")
    _data_dir_arg(revoke)
    revoke.set_defaults(func=cmd_principal_revoke)
    rotate = principal_sub.add_parser("rotate", help="give a principal a new token (printed); the old one fails")
    rotate.add_argument("name")
    rotate.add_argument(
        "--ttl", type=seconds("--ttl"), default=0, help="seconds until the new token expires (default: never)"
    )
    _data_dir_arg(rotate)
    rotate.set_defaults(func=cmd_principal_rotate)

    grant = subparsers.add_parser("grant", help="grant an agent verbs on a target")
    grant.add_argument("--principal", required=True, help="the agent")
    grant.add_argument("--target", required=True, help="the controlled session")
    grant.add_argument("--verbs", required=True, help="comma-separated, e.g. submit,input")
    grant.add_argument("--origin", action="append", default=[], help="allowed origin (repeatable; none = any)")
    grant.add_argument("--ttl", type=seconds("--ttl"), default=0, help="lifetime in seconds (0 = no expiry)")
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
    grant.add_argument(
        "--idempotency-header",
        action="store_true",
        help="add an Idempotency-Key header (from the action id) to the side-effecting requests of its actions",
    )
    grant.add_argument("--single-use", action="store_true", help="used up by the first allow")
    grant.add_argument("--task", default="", help="bind to a task; close-task ends it")
    grant.add_argument("--require-approval", default="", help="comma-separated verbs that need approval")
    grant.add_argument(
        "--approval-timeout", type=seconds("--approval-timeout"), default=0, help="seconds an approval may wait"
    )
    _remote_args(grant)
    grant.set_defaults(func=remote(cmd_grant))

    close_task = subparsers.add_parser("close-task", help="end every grant bound to a task")
    close_task.add_argument("task_id")
    _remote_args(close_task)
    close_task.set_defaults(func=remote(cmd_close_task))

    approve = subparsers.add_parser("approve", help="approve a pending action")
    approve.add_argument("approval_id")
    approve.add_argument("--note", default="")
    _remote_args(approve)
    approve.set_defaults(func=remote(cmd_approve))

    deny = subparsers.add_parser("deny", help="deny a pending action")
    deny.add_argument("approval_id")
    deny.add_argument("--note", default="")
    _remote_args(deny)
    deny.set_defaults(func=remote(cmd_deny))

    approvals = subparsers.add_parser("approvals", help="list approvals, newest first")
    approvals.add_argument("--status", default="", help="pending, approved, denied, expired or used (default any)")
    approvals.add_argument("--principal", default="")
    approvals.add_argument("--target", default="")
    approvals.add_argument("--limit", type=int, default=100)
    _remote_args(approvals)
    approvals.set_defaults(func=remote(cmd_approvals))

    watch = subparsers.add_parser("watch", help="print lease, grant and approval changes")
    watch.add_argument("targets", nargs="*", help="targets to watch (default: all)")
    watch.add_argument("--since-seq", type=int, default=0)
    watch.add_argument("--count", type=int, default=0, help="stop after this many events")
    _remote_args(watch)
    watch.set_defaults(func=remote(cmd_watch, timeout_s=None))

    revoke = subparsers.add_parser("revoke", help="revoke a grant")
    revoke.add_argument("grant_id")
    _remote_args(revoke)
    revoke.set_defaults(func=remote(cmd_revoke))

    grants = subparsers.add_parser("grants", help="list grants")
    grants.add_argument("--principal", default="")
    grants.add_argument("--target", default="")
    grants.add_argument("--all", action="store_true", help="include revoked and expired")
    _remote_args(grants)
    grants.set_defaults(func=remote(cmd_grants))

    takeover = subparsers.add_parser("takeover", help="take human control of a target")
    takeover.add_argument("target")
    takeover.add_argument("--note", default="")
    takeover.add_argument("--ttl", type=seconds("--ttl"), default=0, help="seconds (default 600)")
    _remote_args(takeover)
    takeover.set_defaults(func=remote(cmd_takeover))

    handback = subparsers.add_parser("handback", help="hand a target's lease back")
    handback.add_argument("target")
    handback.add_argument("--next", default="", help="the only agent that may acquire next")
    _remote_args(handback)
    handback.set_defaults(func=remote(cmd_handback))

    lease = subparsers.add_parser("lease", help="show a target's control lease")
    lease.add_argument("target")
    _remote_args(lease)
    lease.set_defaults(func=remote(cmd_lease))

    expire = subparsers.add_parser("expire-lease", help="make a target's lease lapse (admin)")
    expire.add_argument("target")
    _remote_args(expire)
    expire.set_defaults(func=remote(cmd_expire_lease))


def _local_or_remote_args(parser: argparse.ArgumentParser) -> None:
    _remote_args(parser)
    parser.add_argument(
        "--data-dir",
        default=None,
        help="read authz.sqlite in this directory instead of asking the sidecar",
    )
    parser.add_argument(
        "--store",
        default="",
        metavar="postgresql://...",
        help="read this PostgreSQL store instead of asking the sidecar",
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
