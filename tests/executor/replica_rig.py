"""The rig of ``test_replicas_at_the_click``: three ``authz serve`` replicas over one
PostgreSQL schema, one real executor (its Chromium, its ledger in the same schema through
a TCP proxy that can be cut), a fixture app that counts its submits, and readers of the
ledger and of the database's sessions."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from handrail.authz import AuthzClient, PgStore
from handrail.executor import ExecutorClient
from handrail.scenarios import ServerProcess, SubscriptionApp, free_port, start_executor
from handrail.scenarios._base import Reply
from handrail.scenarios._postgres import fresh_schema, pg_url
from tests.authz.test_replica_faults import Cluster
from tests.tcp_proxy import TcpProxy

EXE = "exe-at-the-click"
SLOW = "slow"
PAUSE_MS = 700
AGENTS = tuple(f"agent-{i}" for i in range(1, 7))
LEDGER_APP = "handrail-ledger-at-the-click"


class CountingApp(SubscriptionApp):
    """The subscription app whose "Pause plan" stays: every POST /pause is counted (by the
    fixture's server) and the page is the same after it, so a test can submit again."""

    def _post(self, path: str, form: Mapping[str, str]) -> Reply | None:
        if path == "/pause":
            self._record_action("pause")
            return Reply.redirect("/")
        return super()._post(path, form)

    @property
    def submits(self) -> int:
        return int(self.state()["requests"].get("POST /pause", 0))


@dataclass
class Rig:
    dsn: str
    cluster: Cluster
    executor: ServerProcess
    proxy: TcpProxy
    data: Path
    tokens: dict[str, str]

    def ops(self, *which: int, timeout_s: float = 2.0) -> AuthzClient:
        """An operator's client of the replicas ``which`` (all when none)."""
        ports = [self.cluster.ports[i] for i in which] if which else self.cluster.ports
        return AuthzClient(",".join(f"127.0.0.1:{p}" for p in ports), self.tokens["op"], timeout_s=timeout_s)

    def agent(self, name: str) -> ExecutorClient:
        return ExecutorClient(self.executor.address, self.tokens[name], timeout_s=30)

    def entries(self, session_id: str) -> list[dict[str, Any]]:
        """The executor's ledger entries of ``session_id``, in order (read directly)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT kind, action_id, idempotency_key, epoch, body FROM ledger_entries"
                " WHERE executor_id = %s AND session_id = %s ORDER BY seq",
                (EXE, session_id),
            ).fetchall()
        # the columns over the body's fields (a refusal's body has the action's kind)
        return [{**json.loads(b), "kind": k, "action_id": a, "key": i, "epoch": e} for k, a, i, e, b in rows]

    def wait_intent(self, session_id: str, key: str, timeout_s: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = [e for e in self.entries(session_id) if e["kind"] == "intent" and e["key"] == key]
            if found:
                return found[0]
            assert time.monotonic() < deadline, f"no intent keyed {key!r} in the ledger"
            time.sleep(0.01)

    def dispatches(self, session_id: str) -> list[dict[str, Any]]:
        """The results of the session's actions that were (or may have been) dispatched,
        each checked to follow its action's intent (durable before dispatch), one per action."""
        intents: set[str] = set()
        started: list[dict[str, Any]] = []
        for e in self.entries(session_id):
            if e["kind"] == "intent":
                intents.add(e["action_id"])
            elif e["kind"] == "result" and e["execution_started"]:
                assert e["action_id"] in intents, f"dispatched with no intent before it: {e}"
                assert e["action_id"] not in {d["action_id"] for d in started}, f"dispatched twice: {e}"
                started.append(e)
        return started


def ledger_dsn(dsn: str, port: int) -> str:
    """``dsn`` through the proxy on ``port``, its connections named ``LEDGER_APP``."""
    parts = urlsplit(pg_url(dsn, application_name=LEDGER_APP))
    host = f"{parts.hostname}:{port}"
    if parts.username:
        host = f"{parts.username}@{host}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def start_rig(server_dsn: str, data: Path) -> Iterator[Rig]:
    """The rig on a fresh schema of the server at ``server_dsn``, until the generator ends."""
    schema, dsn = fresh_schema(server_dsn)
    with PgStore(dsn, pool_size=2) as store:
        tokens = {name: store.add_principal(name, "agent") for name in AGENTS}
        tokens["op"] = store.add_principal("op", "operator")
        tokens["exe"] = store.add_principal("exe", "executor")
    cluster = Cluster(dsn, [free_port() for _ in range(3)], [None, None, None], tokens)
    upstream = urlsplit(pg_url(dsn))
    proxy = TcpProxy((upstream.hostname or "127.0.0.1", upstream.port or 5432))
    executor = None
    try:
        # Only replica 0 is up when the executor starts: its Watch stream is on replica 0
        # (the others refuse connections) and stays there while replica 0 lives.
        cluster.start(0)
        executor = start_executor(
            data,
            cluster.addresses,
            tokens["exe"],
            extra=[
                "--ledger",
                ledger_dsn(dsn, proxy.port),
                "--executor-id",
                EXE,
                "--fault",
                f"after-intent:{SLOW}:sleep={PAUSE_MS}",
            ],
        )
        time.sleep(1.5)  # the Watch has found replica 0 (the others were tried and refused)
        cluster.start(1)
        cluster.start(2)
        yield Rig(dsn, cluster, executor, proxy, data, tokens)
    finally:
        if executor is not None:
            executor.stop()
        cluster.stop_all()
        proxy.close()
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def grant(rig: Rig, agent: str, target: str, app: CountingApp, *, single_use: bool = False) -> str:
    with rig.ops() as ops:
        ops.grant(agent, target, ["navigate"], [app.url])
        return ops.grant(agent, target, ["submit"], [app.url], single_use=single_use).grant_id


def in_background(work: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(work, *args, **kwargs)
    finally:
        pool.shutdown(wait=False)


def replica_of_port(rig: Rig, client_port: int) -> int:
    """Which replica process owns the local TCP port ``client_port`` (its connection to
    PostgreSQL), read from /proc."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == client_port:
                    inodes.add(fields[9])
    for i, proc in enumerate(rig.cluster.procs):
        if proc is None:
            continue
        fds = Path(f"/proc/{proc.proc.pid}/fd")
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd).removeprefix("socket:[").rstrip("]") in inodes:
                    return i
    raise AssertionError(f"no replica owns port {client_port}")


def checking_replica(rig: Rig, timeout_s: float = 5.0) -> int:
    """The replica whose database session waits on a lock (the blocker's): mid-check."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(rig.dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT client_port FROM pg_stat_activity"
                " WHERE application_name = 'handrail-authz' AND wait_event_type = 'Lock'"
                " AND query LIKE '%UPDATE grants%'"
            ).fetchone()
            if row is not None:
                return replica_of_port(rig, int(row[0]))
            assert time.monotonic() < deadline, "no check came to wait on the grant's row"
            time.sleep(0.005)


def cut_ledger_backends(rig: Rig) -> int:
    with psycopg.connect(rig.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            (LEDGER_APP,),
        ).fetchone()
    return int(row[0]) if row else 0


def lease_changes(rig: Rig, target: str) -> list[str]:
    with psycopg.connect(rig.dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT body FROM ledger_entries WHERE executor_id = %s AND kind = 'lease_change' ORDER BY seq", (EXE,)
        ).fetchall()
    return [b["event"] for b in (json.loads(r[0]) for r in rows) if b["target"] == target]
