"""The executor in front of three sidecar replicas, judged where the harm happens: the click.

Real processes: one ``handrail executor serve`` (its Chromium shared by every test here),
three ``handrail authz serve`` replicas over one schema of the session's private PostgreSQL,
the executor's ledger in the same schema (reached through a TCP proxy the tests can cut).
The fixture app counts every ``POST /pause`` it receives: that count is the ground truth.

Whatever the faults (a replica stopped, killed mid-check, every replica down, the ledger's
connection cut, a takeover and hand-back racing a check), a click the agent asked for
reaches the page at most once, never without an allow, never at an epoch a takeover has
superseded, and never without its intent committed first.

The executor pauses ``PAUSE_MS`` after the intent of any action keyed ``SLOW`` (its
``--fault after-intent:SLOW:sleep=MS``): the window between the allow and the dispatch
in which the tests move the lease or cut the ledger.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from handrail.authz import AuthzClient, PgStore
from handrail.executor import ExecutorClient, Outcome
from handrail.scenarios import ServerProcess, SubscriptionApp, start_executor
from handrail.scenarios._base import Reply
from handrail.scenarios._postgres import PrivatePostgres, fresh_schema, pg_url
from tests.authz.test_replica_faults import Cluster, _free_port

pytestmark = [pytest.mark.slow, pytest.mark.browser]

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


class Proxy:
    """A TCP proxy in front of PostgreSQL for the executor's ledger: ``cut()`` ends every
    connection through it and refuses new ones until ``restore()``."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._open = True
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if not self._open:
                    client.close()
                    continue
                try:
                    server = socket.create_connection(self.upstream, timeout=5)
                except OSError:
                    client.close()
                    continue
                server.settimeout(None)
                self._conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            self._open = False
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def restore(self) -> None:
        with self._lock:
            self._open = True

    def close(self) -> None:
        self.cut()
        self._listener.close()


@dataclass
class Rig:
    dsn: str
    cluster: Cluster
    executor: ServerProcess
    proxy: Proxy
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
        return [{"kind": k, "action_id": a, "key": i, "epoch": e, **json.loads(b)} for k, a, i, e, b in rows]

    def wait_intent(self, session_id: str, key: str, timeout_s: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = [e for e in self.entries(session_id) if e["kind"] == "intent" and e["key"] == key]
            if found:
                return found[0]
            assert time.monotonic() < deadline, f"no intent keyed {key!r} in the ledger"
            time.sleep(0.01)

    def dispatches(self, session_id: str) -> list[dict[str, Any]]:
        """The results of the session's actions that were (or may have been) dispatched."""
        return [e for e in self.entries(session_id) if e["kind"] == "result" and e["execution_started"]]


def _ledger_dsn(dsn: str, port: int) -> str:
    """``dsn`` through the proxy on ``port``, its connections named ``LEDGER_APP``."""
    parts = urlsplit(pg_url(dsn, application_name=LEDGER_APP))
    host = f"{parts.hostname}:{port}"
    if parts.username:
        host = f"{parts.username}@{host}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


@pytest.fixture(scope="module")
def rig(postgres: PrivatePostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    schema, dsn = fresh_schema(postgres.dsn)
    with PgStore(dsn, pool_size=2) as store:
        tokens = {name: store.add_principal(name, "agent") for name in AGENTS}
        tokens["op"] = store.add_principal("op", "operator")
        tokens["exe"] = store.add_principal("exe", "executor")
    cluster = Cluster(dsn, [_free_port() for _ in range(3)], [None, None, None], tokens)
    upstream = urlsplit(pg_url(dsn))
    proxy = Proxy((upstream.hostname or "127.0.0.1", upstream.port or 5432))
    data = tmp_path_factory.mktemp("at-the-click")
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
                _ledger_dsn(dsn, proxy.port),
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
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def app() -> Iterator[CountingApp]:
    fixture = CountingApp()
    fixture.start()
    try:
        yield fixture
    finally:
        fixture.stop()


def _grant(rig: Rig, agent: str, target: str, app: CountingApp, *, single_use: bool = False) -> str:
    with rig.ops() as ops:
        ops.grant(agent, target, ["navigate"], [app.url])
        return ops.grant(agent, target, ["submit"], [app.url], single_use=single_use).grant_id


def _in_background(work: Callable[[], Any]) -> Future[Any]:
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(work)
    finally:
        pool.shutdown(wait=False)


# --- 1. the replica the executor talks to stops; a person takes over through another -------------


def test_a_takeover_through_another_replica_while_the_watch_replica_is_stopped(rig: Rig, app: CountingApp) -> None:
    """The executor's Watch is on replica 0. The agent's submit is allowed at epoch E; in
    the moment between its intent and its dispatch replica 0 is stopped and an operator
    takes over through replicas 1 and 2. The click must not reach the page, and nothing
    the stopped replica held is replayed onto it when it resumes."""
    agent, target = "agent-1", "browser:click-1"
    _grant(rig, agent, target, app)
    with rig.agent(agent) as client:
        session = client.open_session(target=target, start_url=app.url + "/")
        epoch = session.info.lease_epoch
        assert epoch > 0
        pause = session.find("button", "Pause plan")
        clicked = _in_background(lambda: session.click(pause, idempotency_key=SLOW))
        rig.wait_intent(session.session_id, SLOW)  # allowed at `epoch`, durable, not dispatched
        rig.cluster.pause(0)
        try:
            with rig.ops(1, 2) as ops:
                taken = ops.take_over(target, note="at the click")
            assert taken.epoch > epoch
            result = clicked.result(timeout=30).result
            assert app.submits == 0, "the click was dispatched after the takeover had superseded its epoch"
            assert (result.outcome, result.reason, result.execution_started) == (
                Outcome.REFUSED,
                "STALE_EPOCH",
                False,
            )
            assert f"lease epoch {epoch} was superseded" in result.message
            # The agent's next submit (same observation): refused, a person holds the lease.
            again = session.click(pause, idempotency_key="after-takeover").result
            assert (again.outcome, again.reason) == (Outcome.REFUSED, "HELD_BY_HUMAN"), again
            assert "taken control" in again.message
        finally:
            rig.cluster.resume(0)
        time.sleep(1.0)  # whatever replica 0 held is answered now; nothing reaches the page
        assert app.submits == 0
        assert rig.dispatches(session.session_id) == []
        # The person hands back; the agent observes again (re-acquires) and its submit goes.
        with rig.ops() as ops:
            ops.hand_back(target, taken.epoch)
        session.observe()
        done = session.click(session.find("button", "Pause plan"), idempotency_key="after-handback").result
        assert done.outcome is Outcome.DONE, done
        assert app.submits == 1
        session.close()
