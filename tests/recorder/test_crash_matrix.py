"""The crash matrix: ``kill -9`` the executor at each point of an action's life, 12 times each
(``HANDRAIL_CRASH_RUNS`` for more: each run is one executor start, about 3 s on 2 cores).

One authz sidecar serves every run. The 12 runs of a point are played by ``CHAINS``
chains side by side; each chain has its own subscription fixture app and its own data dir
(ledger), since
an executor's recovery at start would take another executor's in-flight intent for a
crashed one. Each run gets its own target (``browser:crash-POINT-N``) and idempotency key,
the chain's app is reset, and the action is a click on "Pause plan" (a form POST the app
counts). The executor is started with ``--fault POINT:KEY``, so it SIGKILLs itself at that
point of exactly that action. A run:

1. open a session, observe, click "Pause plan" with key KEY: the call fails, the executor
   is dead (SIGKILL);
2. with no executor running, the ledger holds what the point implies (no lost intent, no
   intent before it) and verifies, and the app has counted what the point implies (0
   requests before dispatch, 1 after: never 2);
3. a new executor starts on the same data dir (recovery): an intent without a result is
   now ``UNKNOWN``; a new session of the same agent on the same target has its first write
   refused ``RECONCILE_REQUIRED``, reconciles with the verdict the app's state shows, and
   writes again; a killed-before-intent or after-result action blocks nothing;
4. the app still counts what the point implies, and the ledger verifies.

Within a chain, the executor restarted for run N is the one armed for run N+1 (``--fault
POINT:KEY(N+1)``): a fault with a key fires only for the action with that key, so for run
N's checks it is an executor without a fault. So every run costs one executor start, not
two.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from handrail.authz import AuthzClient, Store
from handrail.executor import ExecutorClient, Outcome
from handrail.recorder import EntryBody, Ledger, ReconcileBody, ResultBody
from handrail.scenarios import ServerProcess, SubscriptionApp, start_authz, start_executor

pytestmark = [pytest.mark.slow, pytest.mark.browser]

POINTS = ("before-intent", "after-intent", "after-dispatch", "after-result")
RUNS = int(os.environ.get("HANDRAIL_CRASH_RUNS", "12"))
CHAINS = 2
PAUSE = "POST /pause"

# What each point implies: is the intent durable, is the result durable, did the request
# reach the app?
_INTENT = {"before-intent": False, "after-intent": True, "after-dispatch": True, "after-result": True}
_RESULT = {"before-intent": False, "after-intent": False, "after-dispatch": False, "after-result": True}
_REQUESTS = {"before-intent": 0, "after-intent": 0, "after-dispatch": 1, "after-result": 1}


@dataclass
class Env:
    """One chain's world: the shared sidecar, its own app and data dir."""

    data_dir: Path
    authz: ServerProcess
    app: SubscriptionApp
    agent_token: str
    executor_token: str

    @property
    def ledger_path(self) -> Path:
        return self.data_dir / "ledger.sqlite"

    def start_executor(self, fault: str) -> ServerProcess:
        extra = ["--fault", fault] if fault else []
        return start_executor(self.data_dir, self.authz.address, self.executor_token, extra=extra)

    def requests(self) -> int:
        return int(self.app.state()["requests"].get(PAUSE, 0))


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Env]]:
    root = tmp_path_factory.mktemp("crash-matrix")
    with Store(root / "authz.sqlite") as store:
        tokens = {
            name: store.add_principal(name, role)
            for name, role in (("operator-0", "operator"), ("executor-0", "executor"), ("crash-agent", "agent"))
        }
    apps = [SubscriptionApp() for _ in range(CHAINS)]
    authz = start_authz(root)
    try:
        for app in apps:
            app.start()
        with AuthzClient(authz.address, tokens["operator-0"]) as ops:
            origins = [app.url for app in apps]
            ops.grant("crash-agent", "browser:crash-*", ["submit", "navigate"], origins, note="crash matrix")
        yield [
            Env(root / f"chain-{k}", authz, app, tokens["crash-agent"], tokens["executor-0"])
            for k, app in enumerate(apps)
        ]
    finally:
        authz.stop()
        for app in apps:
            app.stop()


def _wait_dead(executor: ServerProcess, what: str) -> None:
    deadline = time.monotonic() + 10
    while executor.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    code = executor.proc.poll()
    executor.kill()  # collects it (if it were still alive: kills it) and closes its output
    assert code == -signal.SIGKILL, f"{what}: the executor did not die by SIGKILL (exit {code})"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("point", POINTS)
def test_kill_at_each_point(chains: list[Env], point: str) -> None:
    runs = [f"{point}-{i}" for i in range(RUNS)]
    shares = [runs[k::CHAINS] for k in range(CHAINS)]
    with ThreadPoolExecutor(CHAINS) as pool:
        futures = [pool.submit(_chain, env, point, keys) for env, keys in zip(chains, shares, strict=True)]
        played = sum(f.result() for f in futures)  # re-raises a chain's failure
    assert played == RUNS


def _chain(env: Env, point: str, keys: list[str]) -> int:
    """Play ``keys``' runs one after the other on ``env``; return how many were played."""
    if not keys:
        return 0
    executor = env.start_executor(f"{point}:{keys[0]}")
    try:
        for i, key in enumerate(keys):
            following = f"{point}:{keys[i + 1]}" if i + 1 < len(keys) else ""
            executor = _one_run(env, executor, point, key, f"browser:crash-{key}", following)
    finally:
        executor.stop()
    with Ledger(env.ledger_path) as ledger:
        report = ledger.verify()
        assert report.ok, report.message
    return len(keys)


def _one_run(env: Env, executor: ServerProcess, point: str, key: str, target: str, next_fault: str) -> ServerProcess:
    """Kill at ``point`` during the action ``key``, restart, check; return the new executor."""
    what = f"{point} run {key}"
    env.app.reset()
    # 1. The action; the executor kills itself at the point.
    with ExecutorClient(executor.address, env.agent_token, timeout_s=30) as client:
        session = client.open_session(target=target, start_url=env.app.url + "/")
        session.observe()
        with pytest.raises(grpc.RpcError) as caught:
            session.click(session.find("button", "Pause plan"), idempotency_key=key)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, f"{what}: {caught.value}"
        session_id = session.session_id
    _wait_dead(executor, what)

    # 2. Nothing runs: the ledger and the app say what the point implies.
    with Ledger(env.ledger_path) as ledger:
        report = ledger.verify()
        assert report.ok, f"{what}: {report.message}"
        intent = ledger.find_intent_by_key(session_id, key)
        result = ledger.find_result_by_key(session_id, key)
    assert (intent is not None) == _INTENT[point], f"{what}: intent {intent}"
    assert (result is not None) == _RESULT[point], f"{what}: result {result}"
    if result is not None:
        assert result.body_as(ResultBody).outcome == "DONE", f"{what}: {result.body}"
    assert env.requests() == _REQUESTS[point], f"{what}: {env.app.state()['requests']}"

    # 3. Restart on the same data dir: recovery.
    executor = env.start_executor(next_fault)
    with ExecutorClient(executor.address, env.agent_token, timeout_s=30) as client:
        session = client.open_session(target=target, start_url=env.app.url + "/")
        session.observe()
        if intent is not None and result is None:
            with Ledger(env.ledger_path) as ledger:
                results = ledger.entries(action_id=intent.action_id, kind="result")
            assert [r.body_as(ResultBody).outcome for r in results] == ["UNKNOWN"], f"{what}: {results}"
            # The agent may look (a read) ...
            looked = session.navigate(env.app.url + "/", idempotency_key=key + "-look").result
            assert looked.outcome is Outcome.DONE, f"{what}: {looked}"
            session.observe()
            # ... but its retry with a fresh key is refused, nothing dispatched.
            name = "Pause plan" if "Pause plan" in session.latest.snapshot else "Delete account"  # type: ignore[union-attr]
            retry = session.click(session.find("button", name), idempotency_key=key + "-retry").result
            assert (retry.outcome, retry.reason, retry.execution_started) == (
                Outcome.REFUSED,
                "RECONCILE_REQUIRED",
                False,
            ), f"{what}: {retry}"
            verdict = "HAPPENED" if env.app.state()["paused"] else "DID_NOT_HAPPEN"
            assert verdict == ("HAPPENED" if _REQUESTS[point] else "DID_NOT_HAPPEN"), what
            reconciled = session.reconcile(intent.action_id, verdict, f"the app's paused flag says {verdict}")
            assert reconciled.outcome is Outcome.RECONCILED, f"{what}: {reconciled}"
        # Writes go (again): nothing blocks the target.
        went = session.navigate(env.app.url + "/", idempotency_key=key + "-after").result
        assert went.outcome is Outcome.DONE, f"{what}: {went}"
        session.close()

    # 4. No duplicate dispatch; the chain verifies; nothing is left unresolved.
    assert env.requests() == _REQUESTS[point], f"{what}: {env.app.state()['requests']}"
    with Ledger(env.ledger_path) as ledger:
        report = ledger.verify()
        assert report.ok, f"{what}: {report.message}"
        if intent is not None:
            entries = ledger.entries(action_id=intent.action_id)
            kinds = [(e.kind, _said(e.content)) for e in entries]
            expected = {
                "after-intent": [("intent", ""), ("result", "UNKNOWN"), ("reconcile", "DID_NOT_HAPPEN")],
                "after-dispatch": [("intent", ""), ("result", "UNKNOWN"), ("reconcile", "HAPPENED")],
                "after-result": [("intent", ""), ("result", "DONE")],
            }[point]
            assert kinds == expected, f"{what}: {kinds}"
        assert not [u for u in ledger.unresolved() if u.action_id == (intent.action_id if intent else "")]
    return executor


def _said(body: EntryBody) -> str:
    """What an entry of an action says: a result its outcome, a reconcile its verdict."""
    if isinstance(body, ReconcileBody):
        return body.verdict
    return body.outcome if isinstance(body, ResultBody) else ""
