"""What each authz command does, and how it prints what it got.

:mod:`._cli` builds the command line and points each command here. ``serve`` runs the
sidecar; ``principal add|list`` edit the store file directly; ``policies`` checks a policy
directory locally; the operator commands talk to a running sidecar through an
:class:`AuthzClient` (:func:`remote` opens it and turns errors into exit codes);
``explain`` and ``decisions`` do too, or read the store file with ``--data-dir``.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg

from handrail._args import served_pem, sidecar_roots
from handrail._cpus import parse_cpus, pin_process, span
from handrail._dsn import is_pg_dsn, redact
from handrail._rpc import bound_address, warn_if_plaintext
from handrail._vocabulary import VERBS
from handrail.authz._client import AuthzClient
from handrail.authz._decision_archive import DecisionArchive
from handrail.authz._errors import AuthzError, InvalidArgumentError, PolicyError
from handrail.authz._explain import explain_text, one_line, parse_since
from handrail.authz._models import ApprovalInfo, DecisionRecord, GrantInfo, LeaseInfo, WatchEventInfo
from handrail.authz._pg import PgStore
from handrail.authz._policies import PolicyEngine
from handrail.authz._service import serve
from handrail.authz._sqlite import SqliteStore
from handrail.authz._store import AuthzStore

# --- serve and principals ---------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    """``handrail authz serve``: run until SIGTERM or SIGINT."""
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:  # before anything starts: a mistake is one line naming the option
        tls = served_pem(args.tls_cert, args.tls_key, args.plaintext, args.listen)
    except ValueError as exc:
        print(f"handrail-authz: {exc}", file=sys.stderr)
        return 2
    if tls is None:
        warn_if_plaintext(logging.getLogger("handrail.authz"), "the sidecar", args.listen)
    if args.cpus is not None:
        try:  # before the server starts its threads: they inherit it
            cpus = parse_cpus(args.cpus)
        except ValueError as exc:
            print(f"handrail-authz: cannot start: {exc}", file=sys.stderr)
            return 1
        pin_process(cpus)
        logging.getLogger("handrail.authz").info("authz kept on CPU %s", span(cpus))
    try:
        server, port = serve(
            args.data_dir,
            args.listen,
            args.policies,
            durable_decisions=args.durable_decisions,
            shadow_policies_dir=args.shadow_policies,
            approval_timeout_ms=int(args.approval_timeout * 1000),
            tls_cert=tls[0] if tls else None,
            tls_key=tls[1] if tls else None,
            console_origins=args.console_origin,
            store=args.store or None,
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
    print(f"handrail-authz listening on {bound_address(args.listen, port)}", flush=True)
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


def open_store(data_dir: str, store: str = "") -> AuthzStore:
    """The store the file commands use: ``--store postgresql://...``, else ``authz.sqlite``
    in ``data_dir``.

    Raises:
        AuthzError: a ``--store`` that is not a PostgreSQL URL, or a database that does not answer.
    """
    if store:
        if not is_pg_dsn(store):
            raise InvalidArgumentError("--store", f"must be a postgresql:// URL, not {redact(store, store)!r}")
        # the pool warns of each failed attempt (on the terminal, with no logging set up);
        # a command says what failed in one line of its own
        logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
        return PgStore(store, pool_size=2)
    return SqliteStore.in_dir(data_dir)


def _on_store(args: argparse.Namespace, command: Callable[[AuthzStore], None]) -> int:
    """Run ``command`` on the store of ``--store``, else the file of ``--data-dir``; an error
    is one line, exit 1."""
    pg = getattr(args, "store", "")
    if not pg and not Path(args.data_dir).is_dir() and getattr(args, "func", None) is not cmd_principal_add:
        print(f"error: no data directory {args.data_dir}", file=sys.stderr)
        return 1
    try:
        store = open_store(args.data_dir, pg)
        try:
            command(store)
        finally:
            store.close()
    except AuthzError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _expiry(store: AuthzStore, ttl_s: float) -> int:
    """``ttl_s`` from now by the store's clock (the database's, for PostgreSQL: the one
    that judges the expiry), not this host's."""
    return store.now_ms() + int(ttl_s * 1000) if ttl_s > 0 else 0


def cmd_principal_add(args: argparse.Namespace) -> int:
    """``handrail authz principal add``: print the new principal's token."""
    return _on_store(
        args, lambda store: print(store.add_principal(args.name, args.role, args.token, _expiry(store, args.ttl)))
    )


def cmd_principal_list(args: argparse.Namespace) -> int:
    """``handrail authz principal list``: name, role, state, added, expires."""

    def show(store: AuthzStore) -> None:
        now = store.now_ms()
        for p in store.principals():
            print(
                f"{p.name}\t{p.role}\t{p.state(now)}\tadded {_when(p.created_at_ms)}\texpires {_when(p.expires_at_ms)}"
            )

    return _on_store(args, show)


def cmd_principal_revoke(args: argparse.Namespace) -> int:
    """``handrail authz principal revoke``."""

    def revoke(store: AuthzStore) -> None:
        info = store.revoke_principal(args.name)
        print(f"revoked {info.name} ({info.role}) at {_when(info.revoked_at_ms)}")

    return _on_store(args, revoke)


def cmd_principal_rotate(args: argparse.Namespace) -> int:
    """``handrail authz principal rotate``: print the new token."""
    return _on_store(args, lambda store: print(store.rotate_token(args.name, None, _expiry(store, args.ttl))[1]))


#: The youngest decisions ``prune-decisions`` may delete: a day old (a cutoff nearer than
#: that is taken for a typo, as ``1m`` for ``1mo``).
MIN_RETENTION_MS = 86_400_000

#: The most decisions ``prune-decisions --batch`` deletes per transaction.
MAX_PRUNE_BATCH = 100_000


def cmd_prune_decisions(args: argparse.Namespace) -> int:
    """``handrail authz prune-decisions``: delete decisions older than ``--older-than``."""

    def prune(store: AuthzStore) -> None:
        now = store.now_ms()
        try:
            before = parse_since(args.older_than, now)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError("--older-than", str(exc).split(": ", 1)[-1]) from None
        if now - before < MIN_RETENTION_MS:
            raise InvalidArgumentError(
                "--older-than",
                f"{args.older_than!r} would reach decisions logged after {_when(now - MIN_RETENTION_MS)}; "
                "decisions younger than a day are kept",
            )
        if before <= 0:
            raise InvalidArgumentError("--older-than", f"{args.older_than!r} reaches before 1970")
        if not 0 <= args.batch <= MAX_PRUNE_BATCH:
            raise InvalidArgumentError("--batch", f"0 (the store's own) or 1..{MAX_PRUNE_BATCH:,}, not {args.batch}")
        if args.archive is None or args.dry_run:
            where = ""
            if args.archive is not None:  # what the real run would refuse, said now
                try:
                    DecisionArchive.check(args.archive)
                except OSError as exc:
                    raise InvalidArgumentError("--archive", f"{args.archive}: {exc.strerror or exc}") from None
                where = f", to be archived to {args.archive}"
            count = _pruning(store, before, dry_run=args.dry_run, batch=args.batch)
        else:
            try:
                archive = DecisionArchive(args.archive)
            except OSError as exc:
                raise InvalidArgumentError("--archive", f"{args.archive}: {exc.strerror or exc}") from None
            try:
                count = _pruning(store, before, keep=archive.write, batch=args.batch)
            except OSError as exc:
                done = f"{archive.rows:,} decisions archived and pruned before it"
                raise InvalidArgumentError("--archive", f"{args.archive}: {exc.strerror or exc} ({done})") from None
            finally:
                archive.close()
            where = f", archived to {args.archive}"
        verb = "would prune" if args.dry_run else "pruned"
        print(f"{verb} {count:,} decision{'' if count == 1 else 's'} logged before {_when(before)}{where}")

    return _on_store(args, prune)


def _pruning(store: AuthzStore, before: int, **how: Any) -> int:
    """``store.prune_decisions(before, **how)``, a database's own error as one line."""
    try:
        return store.prune_decisions(before, **how)
    except (sqlite3.Error, psycopg.Error) as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AuthzError(f"the store: {problem} (what was pruned before it stays pruned)") from None


# --- operator commands ------------------------------------------------------------------------


def _client(args: argparse.Namespace, timeout_s: float | None = 5.0) -> AuthzClient:
    ca, server_name = sidecar_roots(args.tls_ca, args.tls_server_name)
    return AuthzClient(
        args.authz,
        args.token,
        timeout_s=timeout_s if timeout_s is not None else 5.0,
        root_certificates=ca,
        server_name=server_name,
    )


def remote(
    command: Callable[[AuthzClient, argparse.Namespace], None],
    timeout_s: float | None = 5.0,
) -> Callable[[argparse.Namespace], int]:
    """The command line's entry for an operator command: check the token, open a client,
    run ``command`` with it, and turn an authz or OS error into exit code 1."""

    def run(args: argparse.Namespace) -> int:
        if not args.token:
            print("error: no token (pass --token or set HANDRAIL_TOKEN)", file=sys.stderr)
            return 1
        try:
            client = _client(args, timeout_s)
        except ValueError as exc:  # the TLS options: an operator's mistake, said before dialling
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except (AuthzError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        try:
            with client:
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
        (grant.idempotency_header, "Idempotency-Key header"),
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
    grant = client.grant(
        args.principal,
        args.target,
        _verbs(args.verbs),
        args.origin,
        0,
        args.note,
        ttl_ms=round(args.ttl * 1000),
        path_globs=args.path,
        role_patterns=args.role,
        name_patterns=args.name,
        window_class_patterns=args.window_class,
        window_title_patterns=args.window_title,
        allow_password_input=args.allow_password_input,
        idempotency_header=args.idempotency_header,
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
    if args.data_dir or args.store:
        try:
            store = open_store(args.data_dir, args.store)
            try:
                record = store.get_decision(args.decision_id)
                grants = [store.get_grant(g) for g in record.grants_considered]
            finally:
                store.close()
            try:
                engine: PolicyEngine | None = PolicyEngine.load(args.policies)
            except PolicyError:
                engine = None
            print(explain_text(record, grants, engine))
        except AuthzError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0

    def _remote_call(client: AuthzClient, args: argparse.Namespace) -> None:
        print(client.explain_decision(args.decision_id)[1])

    return remote(_remote_call)(args)


def cmd_decisions(args: argparse.Namespace) -> int:
    """``handrail authz decisions``: over the RPC, or from the file with ``--data-dir``."""
    try:
        since = parse_since(args.since, _now_ms()) if args.since else 0
    except AuthzError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    reason = args.reason.upper()
    if args.data_dir or args.store:
        try:
            store = open_store(args.data_dir, args.store)
            try:
                records = store.list_decisions(args.principal, args.target, reason, since, args.limit)
            finally:
                store.close()
        except AuthzError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        _print_records(records)
        return 0

    def _remote_call(client: AuthzClient, args: argparse.Namespace) -> None:
        _print_records(client.list_decisions(args.principal, args.target, reason, since, args.limit))

    return remote(_remote_call)(args)
