"""A served executor whose PostgreSQL ledger stalls: the stall stops the write that needs
the ledger, and nothing else.

Real processes: ``handrail authz serve``, ``handrail executor serve --ledger`` (its
Chromium) with the ledger reached through a proxy that holds every byte while stalled,
and a fixture app that counts its submits. Agent A clicks while the ledger is stalled; as
long as the stall lasts, agent B's Observe, the executor's gRPC health check, the renewal
of B's lease and a takeover pushed by the Watch all answer promptly (before, the executor's
event loop waited on the ledger, and every one of them waited with it). When the ledger
comes back A's click goes, once, after its intent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from handrail.authz import AuthzClient, Store
from handrail.executor import ExecutorClient, Outcome
from handrail.scenarios import ServerProcess, start_authz, start_executor
from handrail.scenarios._postgres import PrivatePostgres, fresh_schema
from tests.executor.replica_rig import CountingApp, in_background
from tests.tcp_proxy import TcpProxy, through, upstream_of

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EXE = "exe-stalled"


@dataclass
class Served:
    dsn: str
    authz: ServerProcess
    executor: ServerProcess
    proxy: TcpProxy
    tokens: dict[str, str]

    def ops(self) -> AuthzClient:
        return AuthzClient(self.authz.address, self.tokens["op"], timeout_s=2)

    def kinds(self, session_id: str) -> list[tuple[str, str]]:
        """(kind, key) of the session's action entries, in chain order, read directly."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT kind, idempotency_key, body FROM ledger_entries"
                " WHERE executor_id = %s AND session_id = %s AND action_id <> '' ORDER BY seq",
                (EXE, session_id),
            ).fetchall()
        return [(k, i if k != "result" else f"{i}:{json.loads(b)['outcome']}") for k, i, b in rows]


@pytest.fixture
def served(postgres: PrivatePostgres, tmp_path: Path) -> Iterator[Served]:
    schema, dsn = fresh_schema(postgres.dsn)
    data = tmp_path / "data"
    data.mkdir()
    with Store(data / "authz.sqlite") as store:
        tokens = {name: store.add_principal(name, "agent") for name in ("agent-a", "agent-b")}
        tokens["op"] = store.add_principal("op", "operator")
        tokens["exe"] = store.add_principal("exe", "executor")
    proxy = TcpProxy(upstream_of(dsn))
    authz = start_authz(data)
    executor = None
    try:
        executor = start_executor(
            data,
            authz.address,
            tokens["exe"],
            extra=["--ledger", through(dsn, proxy), "--executor-id", EXE, "--lease-ttl-ms", "1500"],
        )
        yield Served(dsn, authz, executor, proxy, tokens)
    finally:
        proxy.resume()
        if executor is not None:
            executor.stop()
            print("\n".join(executor.output))  # shown when the test fails
        authz.stop()
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


def _prompt(what: str, seconds: float, limit: float = 1.0) -> None:
    assert seconds < limit, f"{what} took {seconds:.2f} s while the ledger was stalled"


def test_a_stalled_ledger_stalls_one_write_and_not_the_other_sessions_health_or_leases(
    served: Served, app: CountingApp
) -> None:
    with served.ops() as ops:
        for agent in ("agent-a", "agent-b"):
            ops.grant(agent, f"browser:{agent}", ["navigate", "submit"], [app.url])
    a_client = ExecutorClient(served.executor.address, served.tokens["agent-a"], timeout_s=30)
    b_client = ExecutorClient(served.executor.address, served.tokens["agent-b"], timeout_s=5)
    channel = grpc.insecure_channel(served.executor.address)
    health = health_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
    try:
        a = a_client.open_session(target="browser:agent-a", start_url=app.url + "/")
        b = b_client.open_session(target="browser:agent-b", start_url=app.url + "/")
        pause = a.find("button", "Pause plan")
        with served.ops() as ops:
            before = ops.get_lease("browser:agent-b")

        served.proxy.stall()
        try:
            clicked = in_background(a.click, pause, idempotency_key="k-stalled")
            time.sleep(0.5)  # A's call is in the executor, waiting on the ledger
            assert not clicked.done()
            stalled_at = time.monotonic()
            while time.monotonic() - stalled_at < 2.5:  # longer than B's lease TTL (1.5 s)
                t0 = time.monotonic()
                b.observe()
                _prompt("B's Observe", time.monotonic() - t0)
                t0 = time.monotonic()
                served_ = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
                _prompt("the health check", time.monotonic() - t0)
                assert served_.status == health_pb2.HealthCheckResponse.SERVING
                time.sleep(0.1)
            with served.ops() as ops:
                renewed = ops.get_lease("browser:agent-b")
                assert renewed.holder == "agent-b" and renewed.epoch == before.epoch, renewed
                assert renewed.expires_at_ms > before.expires_at_ms, (before, renewed)
                taken = ops.take_over("browser:agent-b", note="while the ledger is stalled")
            t0 = time.monotonic()
            while b.observe().lease_epoch < taken.epoch:  # the Watch told B's fence
                _prompt("the takeover reaching B's fence", time.monotonic() - t0, 2.0)
                time.sleep(0.05)
            assert not clicked.done(), "A's write needs the ledger: it waits"
            assert app.submits == 0
        finally:
            served.proxy.resume()

        result = clicked.result(timeout=30).result
        assert result.outcome is Outcome.DONE, result
        assert app.submits == 1
        assert served.kinds(a.session_id) == [("intent", "k-stalled"), ("result", "k-stalled:DONE")]
        a.close()
        b.close()
    finally:
        channel.close()
        a_client.close()
        b_client.close()
