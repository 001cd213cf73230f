"""A real executor whose ledger is in PostgreSQL, killed (-9) right after an intent is
committed: the intent is in the database, the restarted executor marks it ``UNKNOWN``, the
agent's retry is refused until it reconciles, and the chain verifies, against the head file
the executor keeps in its data dir too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from handrail.authz import AuthzClient, Store
from handrail.executor import ExecutorClient, Outcome
from handrail.recorder import ResultBody, open_ledger
from handrail.scenarios import SubscriptionApp, start_authz, start_executor
from tests.recorder.test_crash_matrix import _wait_dead
from tests.recorder.test_ledger_cli import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EXE = "exe-pg"
TARGET = "browser:pg-crash"


def test_an_executor_killed_after_its_intent_recovers_from_a_postgresql_ledger(
    pg_dsn: Callable[[], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = pg_dsn()
    with Store(tmp_path / "authz.sqlite") as store:
        tokens = {
            n: store.add_principal(n, r) for n, r in (("op", "operator"), ("exe", "executor"), ("agent", "agent"))
        }
    app = SubscriptionApp()
    authz = start_authz(tmp_path)
    data = tmp_path / "executor-data"
    ledger_args = ["--ledger", dsn, "--executor-id", EXE]
    executor = None
    try:
        app.start()
        with AuthzClient(authz.address, tokens["op"]) as ops:
            ops.grant("agent", TARGET, ["submit", "navigate"], [app.url], note="pg crash")
        executor = start_executor(
            data, authz.address, tokens["exe"], extra=[*ledger_args, "--fault", "after-intent:k1"]
        )
        with ExecutorClient(executor.address, tokens["agent"], timeout_s=30) as client:
            session = client.open_session(target=TARGET, start_url=app.url + "/")
            session.observe()
            with pytest.raises(grpc.RpcError) as caught:
                session.click(session.find("button", "Pause plan"), idempotency_key="k1")
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            session_id = session.session_id
        _wait_dead(executor, "after-intent")

        # Dead: the intent is committed in PostgreSQL, no result, nothing reached the app.
        with open_ledger(dsn, executor_id=EXE, read_only=True) as ledger:
            assert ledger.verify().ok
            intent = ledger.find_intent_by_key(session_id, "k1")
            assert intent is not None and ledger.find_result_by_key(session_id, "k1") is None
        assert app.state()["requests"].get("POST /pause", 0) == 0

        # Restarted on the same chain: recovery marks it UNKNOWN and holds the target.
        executor = start_executor(data, authz.address, tokens["exe"], extra=ledger_args)
        with open_ledger(dsn, executor_id=EXE, read_only=True) as ledger:
            results = ledger.entries(action_id=intent.action_id, kind="result")
        assert [r.body_as(ResultBody).outcome for r in results] == ["UNKNOWN"]
        with ExecutorClient(executor.address, tokens["agent"], timeout_s=30) as client:
            session = client.open_session(target=TARGET, start_url=app.url + "/")
            session.observe()
            retry = session.click(session.find("button", "Pause plan"), idempotency_key="k1-retry").result
            assert (retry.outcome, retry.reason, retry.execution_started) == (
                Outcome.REFUSED,
                "RECONCILE_REQUIRED",
                False,
            )
            reconciled = session.reconcile(intent.action_id, "DID_NOT_HAPPEN", "the app counted no pause")
            assert reconciled.outcome is Outcome.RECONCILED
            went = session.click(session.find("button", "Pause plan"), idempotency_key="k2").result
            assert went.outcome is Outcome.DONE
            session.close()
        executor.stop()
        executor = None
        assert app.state()["requests"].get("POST /pause", 0) == 1
    finally:
        if executor is not None:
            executor.kill()
        authz.stop()
        app.stop()

    # The chain verifies, against the head file the executor left in its data dir.
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert f"executor {EXE}: ok:" in out and "head file: seq" in out and "matches" in out
