"""The executor awaits its ledger on the ledger's own thread: the loop goes on meanwhile.

In process (a real sidecar, a fake page), with a ledger that is slow or stalled:

- what was atomic when the ledger ran on the loop stays so: one idempotency key used by
  two writes at once dispatches once; one UNKNOWN action reconciled twice at once is
  reconciled once; an UNKNOWN that comes up while another write's intent is being
  written stops that write before its dispatch;
- a PostgreSQL ledger behind a proxy that stalls: while one session's intent (or result)
  waits, another session observes, its lease is renewed and a takeover pushed by the Watch
  reaches its fence, all promptly; the waiting write ends as the invariants say (not
  dispatched without its intent; an unwritten result is UNKNOWN and blocks the target).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from handrail import ActionKind, Outcome, Reason, Verdict
from handrail.authz import AsyncAuthzClient
from handrail.executor import ActionSpec
from handrail.executor._errors import InvalidArgumentError
from handrail.executor._guard import GuardedExecutor, OpenSpec
from handrail.executor._models import BackendKind
from handrail.executor._session import Session
from handrail.executor.testing import Dispatch, FakeBackend, FaultHooks
from handrail.recorder import AsyncLedger, Ledger, LedgerError, ResultBody, open_ledger
from handrail.scenarios._postgres import PrivatePostgres, fresh_schema
from tests.executor.inproc import ORIGIN, Sidecar
from tests.tcp_proxy import TcpProxy, through, upstream_of


class SlowLedger(Ledger):
    """A SQLite ledger whose every append sleeps ``delay_s`` first, in the thread that
    calls it (the ledger thread): a slow disk, deterministically."""

    delay_s = 0.2

    def append_many(self, entries: Any) -> Any:
        time.sleep(self.delay_s)
        return super().append_many(entries)


@dataclass
class Core:
    core: GuardedExecutor
    ops: AsyncAuthzClient
    sessions: list[Session]
    backends: list[FakeBackend]

    def spec(self, i: int, key: str, ref: str = "e4") -> ActionSpec:
        latest = self.sessions[i].latest
        assert latest is not None
        return ActionSpec(kind=ActionKind.CLICK, ref=ref, observation_id=latest.observation_id, idempotency_key=key)


@contextlib.asynccontextmanager
async def core_on(
    sidecar: Sidecar,
    ledger: Ledger | AsyncLedger,
    *,
    targets: int = 1,
    sessions: int = 1,
    fault: FaultHooks | None = None,
    lease_ttl_ms: int = 30_000,
) -> AsyncIterator[Core]:
    """A started core on ``ledger``; ``sessions`` sessions on each of ``targets`` targets
    (each target its own agent), every session observed once."""
    authz = AsyncAuthzClient(sidecar.address, sidecar.executor_token)
    ops = AsyncAuthzClient(sidecar.address, sidecar.operator_token)
    backends = [FakeBackend() for _ in range(targets * sessions)]
    waiting = iter(backends)

    async def open_backend(spec: OpenSpec) -> FakeBackend:
        return next(waiting)

    core = GuardedExecutor(authz, ledger, open_backend, fault=fault, lease_ttl_ms=lease_ttl_ms)  # type: ignore[arg-type]
    try:
        await core.start()
        deadline = time.monotonic() + 5
        while not core.watching_leases:
            assert time.monotonic() < deadline, "the sidecar's Watch stream did not come up"
            await asyncio.sleep(0.01)
        opened = []
        for _ in range(targets):
            name, token = sidecar.add_agent()
            target = f"browser:{name}"
            await ops.grant(name, target, ["submit", "input", "navigate"], [ORIGIN])
            for _ in range(sessions):
                spec = OpenSpec(BackendKind.BROWSER, target, "", None)
                info = await core.open_session(token=token, agent="", target=target, spec=spec)
                session = core.sessions.get(info.session_id, token)
                await core.observe(session)
                opened.append(session)
        yield Core(core, ops, opened, backends)
    finally:
        await core.close()
        await authz.close()
        await ops.close()


def run(body: Callable[[], Any]) -> None:
    asyncio.run(body())


# --- what stays atomic --------------------------------------------------------------------------


@pytest.mark.parametrize("other_ref", ["e4", "e3"], ids=["same-params", "other-params"])
def test_one_key_used_by_two_writes_at_once_dispatches_once(sidecar: Sidecar, tmp_path: Path, other_ref: str) -> None:
    """Both writes pass every await of the ledger thread at the same time; the session's
    write lock keeps the key's lookup and its intent one step: one dispatch, and the other
    replays its outcome (same parameters) or is a conflict (other parameters)."""

    async def body() -> None:
        with SlowLedger(tmp_path / "ledger.sqlite") as ledger:
            async with core_on(sidecar, ledger) as c:
                session = c.sessions[0]
                first, second = await asyncio.gather(
                    c.core.act(session, c.spec(0, "same")), c.core.act(session, c.spec(0, "same", other_ref))
                )
                assert [s.idempotency_key for s in c.backends[0].dispatched] == ["same"]
                assert first.result.outcome is Outcome.DONE, first.result
                if other_ref == "e4":
                    assert second.result.outcome is Outcome.DONE and "nothing dispatched" in second.result.message
                    assert second.result.action_id == first.result.action_id
                else:
                    assert (second.result.outcome, second.result.reason) == (
                        Outcome.REFUSED,
                        Reason.IDEMPOTENCY_CONFLICT,
                    ), second.result
                assert [e.kind for e in ledger.entries(session_id=session.session_id) if e.action_id] == [
                    "intent",
                    "result",
                ]

    run(body)


def test_an_unknown_action_reconciled_twice_at_once_is_reconciled_once(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        with SlowLedger(tmp_path / "ledger.sqlite") as ledger:
            async with core_on(sidecar, ledger) as c:
                session = c.sessions[0]
                c.backends[0].script(Dispatch.maybe_started())
                lost = (await c.core.act(session, c.spec(0, "k1"))).result
                assert lost.outcome is Outcome.UNKNOWN
                both = await asyncio.gather(
                    c.core.reconcile(session, lost.action_id, Verdict.HAPPENED, "seen"),
                    c.core.reconcile(session, lost.action_id, Verdict.HAPPENED, "seen"),
                    return_exceptions=True,
                )
                assert sum(isinstance(r, InvalidArgumentError) for r in both) == 1, both
                assert [e.kind for e in ledger.entries(action_id=lost.action_id)] == ["intent", "result", "reconcile"]
                assert c.core.unknown_actions(session.target) == []

    run(body)


def test_an_unknown_that_comes_up_while_an_intent_is_written_stops_its_dispatch(
    sidecar: Sidecar, tmp_path: Path
) -> None:
    """Two sessions of one agent on one target. Session B's write passed its checks; while
    its intent is on its way to the ledger, session A's action ends UNKNOWN. B's intent is
    durable, but B is not dispatched: its result says so (not started)."""

    async def body() -> None:
        hooks = FaultHooks()
        with SlowLedger(tmp_path / "ledger.sqlite") as ledger:
            async with core_on(sidecar, ledger, sessions=2, fault=hooks) as c:
                a, b = c.sessions
                c.backends[0].script(Dispatch.maybe_started())
                unknown: list[str] = []

                async def a_goes_unknown(key: str) -> None:
                    unknown.append((await c.core.act(a, c.spec(0, "ka"))).result.action_id)

                hooks.at("before-intent", a_goes_unknown, key="kb")
                result = (await c.core.act(b, c.spec(1, "kb"))).result
                assert [s.idempotency_key for s in c.backends[0].dispatched] == ["ka"]
                assert c.backends[1].dispatched == []
                assert (result.outcome, result.reason, result.execution_started) == (
                    Outcome.REFUSED,
                    Reason.RECONCILE_REQUIRED,
                    False,
                ), result
                assert unknown[0] in result.message
                assert [e.kind for e in ledger.entries(action_id=result.action_id)] == ["intent", "result"]

    run(body)


# --- a PostgreSQL ledger that stalls ----------------------------------------------------------------


@pytest.fixture
def stalling(postgres: PrivatePostgres, tmp_path: Path) -> Any:
    """A PostgreSQL ledger (a fresh schema) reached through a ``TcpProxy``."""
    _, dsn = fresh_schema(postgres.dsn)
    proxy = TcpProxy(upstream_of(dsn))
    ledger = open_ledger(through(dsn, proxy), executor_id="exe-stall", head_dir=tmp_path)
    try:
        yield proxy, ledger
    finally:
        proxy.resume()
        ledger.close()
        proxy.close()


def _resume_after(proxy: TcpProxy, seconds: float) -> threading.Timer:
    """Resume the proxy from a thread: a loop frozen by the ledger could not do it."""
    timer = threading.Timer(seconds, proxy.resume)
    timer.start()
    return timer


async def _others_go_on(c: Core, other: Session, for_s: float) -> None:
    """While the ledger is stalled: ``other`` observes, its lease is renewed, and a takeover
    of its target pushed by the Watch reaches its fence, each promptly."""
    slowest = 0.0

    async def timed(call: Any) -> Any:
        nonlocal slowest
        t0 = time.monotonic()
        out = await call
        slowest = max(slowest, time.monotonic() - t0)
        return out

    lease = await timed(c.ops.get_lease(other.target))
    t_end = time.monotonic() + for_s
    while time.monotonic() < t_end:
        await timed(c.core.observe(other))
        await timed(asyncio.sleep(0.05))
    assert slowest < 0.5, f"another session's call took {slowest:.2f} s while the ledger stalled"
    renewed = await c.ops.get_lease(other.target)
    assert renewed.epoch == lease.epoch and renewed.expires_at_ms > lease.expires_at_ms, (lease, renewed)
    taken = await c.ops.take_over(other.target, note="during the stall")
    t0 = time.monotonic()
    while other.fence.highest_epoch < taken.epoch:
        assert time.monotonic() - t0 < 1.0, "the takeover did not reach the fence: the Watch is stalled"
        await asyncio.sleep(0.01)


@pytest.mark.slow
def test_a_stalled_intent_stalls_only_its_write_and_is_never_dispatched(sidecar: Sidecar, stalling: Any) -> None:
    proxy, pg = stalling
    hooks = FaultHooks()
    hooks.at("before-intent", lambda key: asyncio.sleep(0, proxy.stall()), key="k-stalled")

    async def body() -> None:
        ledger = AsyncLedger(pg, deadline_s=3.0)
        async with core_on(sidecar, ledger, targets=2, fault=hooks, lease_ttl_ms=1500) as c:
            mine, other = c.sessions
            timer = _resume_after(proxy, 6.0)
            try:
                t0 = time.monotonic()
                write = asyncio.ensure_future(c.core.act(mine, c.spec(0, "k-stalled")))
                await _others_go_on(c, other, 2.0)
                with pytest.raises(LedgerError) as caught:
                    await write
                assert caught.value.reason == "LEDGER_TIMEOUT", caught.value
                assert 2.5 < time.monotonic() - t0 < 5.0
                assert c.backends[0].dispatched == []  # never without its intent
            finally:
                timer.join()
            # The ledger is back: the intent landed, and after it the word that it never went.
            deadline = time.monotonic() + 10
            while len(kinds := [e.kind for e in pg.entries(session_id=mine.session_id) if e.action_id]) < 2:
                assert time.monotonic() < deadline, kinds
                await asyncio.sleep(0.05)
            intent, result = pg.entries(session_id=mine.session_id)[-2:]
            assert (intent.kind, result.kind, result.action_id) == ("intent", "result", intent.action_id)
            body_ = result.body_as(ResultBody)
            assert (body_.outcome, body_.execution_started) == ("FAILED", False), body_
            replayed = (await c.core.act(mine, c.spec(0, "k-stalled"))).result
            assert (replayed.outcome, replayed.execution_started) == (Outcome.FAILED, False), replayed
            await c.core.observe(mine)
            again = (await c.core.act(mine, c.spec(0, "k-fresh"))).result
            assert again.outcome is Outcome.DONE, again
            assert [s.idempotency_key for s in c.backends[0].dispatched] == ["k-fresh"]
            assert pg.verify().ok

    run(body)


@pytest.mark.slow
def test_a_result_the_stalled_ledger_did_not_take_in_time_leaves_the_action_unknown(
    sidecar: Sidecar, stalling: Any
) -> None:
    proxy, pg = stalling
    hooks = FaultHooks()
    hooks.at("after-dispatch", lambda key: asyncio.sleep(0, proxy.stall()), key="k-went")

    async def body() -> None:
        ledger = AsyncLedger(pg, deadline_s=3.0)
        async with core_on(sidecar, ledger, targets=2, fault=hooks, lease_ttl_ms=1500) as c:
            mine, other = c.sessions
            timer = _resume_after(proxy, 6.0)
            try:
                write = asyncio.ensure_future(c.core.act(mine, c.spec(0, "k-went")))
                await _others_go_on(c, other, 2.0)
                with pytest.raises(LedgerError):
                    await write
                assert [s.idempotency_key for s in c.backends[0].dispatched] == ["k-went"]
                (unknown,) = c.core.unknown_actions(mine.target)
                await c.core.observe(mine)
                blocked = (await c.core.act(mine, c.spec(0, "k-next"))).result
                assert (blocked.outcome, blocked.reason) == (Outcome.REFUSED, Reason.RECONCILE_REQUIRED), blocked
            finally:
                timer.join()
            reconciled = await c.core.reconcile(mine, unknown.action_id, Verdict.HAPPENED, "the page shows it")
            assert reconciled.outcome is Outcome.RECONCILED
            assert [e.kind for e in pg.entries(action_id=unknown.action_id)] == ["intent", "result", "reconcile"]
            assert [s.idempotency_key for s in c.backends[0].dispatched] == ["k-went"]
            assert pg.verify().ok

    run(body)
