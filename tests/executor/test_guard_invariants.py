"""Every invariant of the guard, in process, without a browser or an X display.

The executor's core runs against a real authz sidecar (in this process, on a free
loopback port) and a real ledger; only the surface is a ``FakeBackend``, scripted to be
stale, changed, slow, or to fail part-way. Each test says which invariant of
``DESIGN.md`` it pins. The real-browser tests (``test_browser_executor.py`` ...) stay for
what only a browser can show.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from handrail import ActionKind, Evidence, Outcome, Reason, Verdict
from handrail.executor import ActionSpec, ActResponse, Expectation, WaitFor
from handrail.executor._faults import POINTS
from handrail.executor.testing import Dispatch, FakeBackend, FaultHooks
from handrail.recorder import Ledger
from tests.executor.inproc import Sidecar, running


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())  # type: ignore[arg-type]


def _refused(r: ActResponse, reason: Reason) -> None:
    assert r.result.outcome is Outcome.REFUSED, r.result
    assert r.result.reason == reason, r.result
    assert not r.result.execution_started, r.result


# -- 1. no write without an allow; fail-closed -----------------------------------------------


def test_allowed_action_is_dispatched_once_with_intent_before_result(sidecar: Sidecar, tmp_path: Path) -> None:
    """Invariant 4: the intent is durable before dispatch; the result after it."""

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            seen_at_dispatch: list[list[str]] = []

            async def look(spec: object) -> None:
                # Another connection to the ledger file: only what is committed shows.
                with Ledger(rig.ledger.path) as other:
                    seen_at_dispatch.append([e.kind for e in other.entries(kind="intent")])

            rig.backend.on_dispatch = look
            await rig.observe()
            r = await rig.act()
            assert r.result.outcome is Outcome.DONE and r.result.execution_started
            assert r.result.evidence is Evidence.OBSERVED and r.observation is not None
            assert [s.ref for s in rig.backend.dispatched] == ["e4"]
            assert seen_at_dispatch == [["intent"]]
            assert rig.kinds(r.result.action_id) == ["intent", "result"]
            assert rig.ledger.verify().ok

    run(body)


def test_out_of_scope_is_refused_before_anything_is_written(sidecar: Sidecar, tmp_path: Path) -> None:
    """Invariant 1: no allow for this verb (a navigate under an input-only grant)."""

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite", verbs=("input",)) as rig:
            await rig.observe()
            r = await rig.act(ActionKind.NAVIGATE, url="https://shop.example/next")
            _refused(r, Reason.OUT_OF_SCOPE)
            assert r.result.decision_id
            assert rig.backend.dispatched == []
            assert rig.kinds(r.result.action_id) == ["refusal"]

    run(body)


def test_authz_down_refuses_writes_but_reads_go_on(sidecar: Sidecar, tmp_path: Path) -> None:
    """Invariant 1: the sidecar unreachable ⇒ AUTHZ_UNAVAILABLE, nothing dispatched."""

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite", deadline_s=1.0) as rig:
            await rig.observe()
            await asyncio.to_thread(sidecar.stop)
            obs = await rig.observe()  # observing needs no sidecar
            r = await rig.act()
            _refused(r, Reason.AUTHZ_UNAVAILABLE)
            assert rig.backend.dispatched == []
            wait = await rig.act(
                ActionKind.WAIT_FOR, wait_for=WaitFor(text="Basket"), observation_id=obs.observation_id
            )
            assert wait.result.outcome is Outcome.DONE and not wait.result.execution_started
            assert [s.kind for s in rig.backend.dispatched] == [ActionKind.WAIT_FOR]  # a read, not a write

    run(body)


def test_authz_slow_past_its_deadline_refuses(sidecar: Sidecar, tmp_path: Path) -> None:
    """Invariant 1: no answer by the deadline ⇒ AUTHZ_UNAVAILABLE, nothing dispatched."""

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite", via_proxy=True, deadline_s=0.5) as rig:
            await rig.observe()
            assert rig.proxy is not None
            rig.proxy.pause()  # the sidecar gets the Check; its answer never arrives
            started = time.monotonic()
            r = await rig.act()
            took = time.monotonic() - started
            _refused(r, Reason.AUTHZ_UNAVAILABLE)
            assert 0.4 < took < 5, took
            assert rig.backend.dispatched == []
            assert rig.kinds(r.result.action_id) == ["refusal"]
            rig.proxy.resume()
            await rig.observe()
            assert (await rig.act()).result.outcome is Outcome.DONE  # the sidecar answers again

    run(body)


# -- 7. revocation and expiry on the very next check ---------------------------------------------


def test_revocation_acts_on_the_very_next_check(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            await rig.observe()
            assert (await rig.act()).result.outcome is Outcome.DONE
            for grant in await rig.ops.list_grants(principal=rig.agent):
                await rig.ops.revoke(grant.grant_id)
            await rig.observe()
            _refused(await rig.act(), Reason.GRANT_REVOKED)
            assert len(rig.backend.dispatched) == 1

    run(body)


def test_expiry_acts_on_the_very_next_check(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite", verbs=()) as rig:
            await rig.ops.grant(rig.agent, rig.target, ["submit"], ["https://shop.example"], sidecar.clock() + 5_000)
            await rig.observe()
            assert (await rig.act()).result.outcome is Outcome.DONE
            sidecar.clock.advance(6_000)  # the sidecar's clock: the grant has lapsed, the lease not
            await rig.observe()
            _refused(await rig.act(), Reason.GRANT_EXPIRED)
            assert len(rig.backend.dispatched) == 1

    run(body)


# -- 2. stale observations, refs and epochs; 3. the surface changed ------------------------------


def test_only_the_latest_observation_may_be_cited(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            first = await rig.observe()
            await rig.observe()
            r = await rig.act(observation_id=first.observation_id)
            _refused(r, Reason.STALE_OBSERVATION)
            assert rig.backend.checks == []  # refused before the surface was even asked
            assert rig.backend.dispatched == []

    run(body)


@pytest.mark.parametrize("reason", [Reason.STALE_REF, Reason.TARGET_CHANGED, Reason.FOCUS_MISMATCH])
def test_a_changed_surface_is_refused_and_the_key_stays_unused(
    sidecar: Sidecar, tmp_path: Path, reason: Reason
) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            await rig.observe()
            rig.backend.refuse_next_check(reason, "the button was re-rendered")
            r = await rig.act(key="pay-1")
            _refused(r, reason)
            assert "re-rendered" in r.result.message
            assert rig.backend.dispatched == []
            await rig.observe()  # the agent observes again and retries with the same key
            again = await rig.act(key="pay-1")
            assert again.result.outcome is Outcome.DONE
            assert len(rig.backend.dispatched) == 1

    run(body)


def test_an_observation_from_before_a_takeover_is_stale(sidecar: Sidecar, tmp_path: Path) -> None:
    """Invariants 2 and 6: a lease change makes the observation stale; a person preempts."""

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            before = await rig.observe()
            lease = await rig.ops.take_over(rig.target, note="a person steps in")
            await _until(lambda: rig.session.fence.highest_epoch >= lease.epoch)
            _refused(await rig.act(), Reason.HELD_BY_HUMAN)
            await rig.ops.hand_back(rig.target, lease.epoch)
            _refused(await rig.act(observation_id=before.observation_id), Reason.STALE_OBSERVATION)
            assert rig.backend.dispatched == []
            after = await rig.observe()  # takes the handed-back lease again
            assert after.lease_epoch > before.lease_epoch
            assert (await rig.act()).result.outcome is Outcome.DONE

    run(body)


# -- 6. the fence at dispatch ----------------------------------------------------------------------


@pytest.mark.parametrize("watch", [True, False], ids=["pushed-by-watch", "asked-before-dispatch"])
def test_takeover_between_decision_and_dispatch_is_not_dispatched(
    sidecar: Sidecar, tmp_path: Path, watch: bool
) -> None:
    async def body() -> None:
        hooks = FaultHooks()
        async with running(sidecar, tmp_path / "ledger.sqlite", watch=watch, fault=hooks) as rig:

            async def take_over(key: str) -> None:
                # Allowed, and the intent is durable: now a person takes control.
                lease = await rig.ops.take_over(rig.target)
                if watch:  # the sidecar pushes the change; the fence has it before dispatch
                    await _until(lambda: rig.session.fence.highest_epoch >= lease.epoch)

            hooks.at("after-intent", take_over, key="pay")
            await rig.observe()
            r = await rig.act(key="pay")
            _refused(r, Reason.STALE_EPOCH)
            assert "not dispatched" in r.result.message and r.result.decision_id
            assert rig.backend.dispatched == []
            assert rig.kinds(r.result.action_id) == ["intent", "result"]
            assert rig.ledger.entries(action_id=r.result.action_id, outcome="REFUSED")

    run(body)


# -- 4. idempotency; UNKNOWN blocks until reconciled, and is never re-dispatched -------------------


def test_same_key_same_action_replays_the_recorded_outcome(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            await rig.observe()
            first = await rig.act(key="order-1")
            assert first.result.outcome is Outcome.DONE
            await rig.observe()  # a new observation: a new ref for the same element would do too
            again = await rig.act(key="order-1")
            assert again.result.outcome is Outcome.DONE
            assert again.result.action_id == first.result.action_id
            assert "nothing dispatched" in again.result.message
            assert len(rig.backend.dispatched) == 1

    run(body)


def test_same_key_other_action_is_a_conflict(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            await rig.observe()
            assert (await rig.act(key="order-1")).result.outcome is Outcome.DONE
            r = await rig.act(key="order-1", ref="e5")  # "Cancel order", not "Pay"
            _refused(r, Reason.IDEMPOTENCY_CONFLICT)
            r = await rig.act(ActionKind.FILL, key="order-1", text="Ada")
            _refused(r, Reason.IDEMPOTENCY_CONFLICT)
            assert len(rig.backend.dispatched) == 1

    run(body)


def test_unknown_blocks_every_write_until_reconciled_and_is_never_redispatched(
    sidecar: Sidecar, tmp_path: Path
) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            await rig.observe()
            rig.backend.script(Dispatch.maybe_started("the connection dropped after the POST"))
            first = await rig.act(key="pay")
            assert first.result.outcome is Outcome.UNKNOWN and first.result.execution_started
            assert [u.action_id for u in rig.core.unknown_actions(rig.target)] == [first.result.action_id]
            await rig.observe()
            # The same key: its recorded outcome, not a second dispatch.
            again = await rig.act(key="pay")
            assert again.result.outcome is Outcome.UNKNOWN and again.result.action_id == first.result.action_id
            # Any other write on the target: refused until reconciled.
            _refused(await rig.act(key="pay-retry"), Reason.RECONCILE_REQUIRED)
            _refused(await rig.act(ActionKind.FILL, key="name"), Reason.RECONCILE_REQUIRED)
            assert len(rig.backend.dispatched) == 1
            reconciled = await rig.core.reconcile(
                rig.session, first.result.action_id, Verdict.DID_NOT_HAPPEN, "the basket is unpaid"
            )
            assert reconciled.outcome is Outcome.RECONCILED and reconciled.evidence is Evidence.RECONCILED
            assert rig.core.unknown_actions(rig.target) == []
            replay = await rig.act(key="pay")
            assert replay.result.outcome is Outcome.RECONCILED and "nothing dispatched" in replay.result.message
            assert (await rig.act(key="pay-retry")).result.outcome is Outcome.DONE
            assert len(rig.backend.dispatched) == 2

    run(body)


# -- 5. execution_started; 11. evidence --------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "outcome", "started", "evidence"),
    [
        (Dispatch.done(), Outcome.DONE, True, Evidence.OBSERVED),
        (Dispatch.slow(0.05), Outcome.DONE, True, Evidence.OBSERVED),
        (Dispatch.not_started("the element moved", Reason.STALE_REF), Outcome.FAILED, False, Evidence.NONE),
        (
            Dispatch.partial("typing stopped", 3, Reason.FOCUS_MISMATCH),
            Outcome.FAILED,
            True,
            Evidence.DISPATCH_RETURNED,
        ),
        (Dispatch.maybe_started(), Outcome.UNKNOWN, True, Evidence.NONE),
        (Dispatch.raises(RuntimeError("the browser crashed")), Outcome.UNKNOWN, True, Evidence.NONE),
    ],
    ids=["done", "slow", "not-started", "partial", "maybe-started", "raises"],
)
def test_execution_started_is_false_only_when_nothing_was_dispatched(
    sidecar: Sidecar, tmp_path: Path, step: Dispatch, outcome: Outcome, started: bool, evidence: Evidence
) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            await rig.observe()
            rig.backend.script(step)
            r = await rig.act(ActionKind.TYPE, text="hello")
            assert (r.result.outcome, r.result.execution_started, r.result.evidence) == (outcome, started, evidence)
            if step.result.reason is not None:
                assert r.result.reason == step.result.reason
            assert rig.kinds(r.result.action_id) == ["intent", "result"]
            assert rig.ledger.entries(action_id=r.result.action_id, outcome=outcome.value)

    run(body)


def test_an_action_that_closes_its_own_target_still_ends_with_its_result(sidecar: Sidecar, tmp_path: Path) -> None:
    """Invariant 14: a click on "Close" that destroys the desktop target is DONE and recorded;
    the re-observation that finds the target gone does not leave the intent without a result."""
    from handrail.executor import TargetGoneError

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            await rig.observe()

            async def closes(spec: ActionSpec) -> None:
                rig.backend.observe_error = TargetGoneError("the target window 0x1 was destroyed")

            rig.backend.on_dispatch = closes
            r = await rig.act()
            assert r.result.outcome is Outcome.DONE and r.observation is None, r.result
            assert r.result.evidence is Evidence.DISPATCH_RETURNED and "destroyed" in r.result.message
            assert rig.kinds(r.result.action_id) == ["intent", "result"]

    run(body)


def test_verified_only_with_an_expectation_that_holds(sidecar: Sidecar, tmp_path: Path) -> None:
    """Invariant 11: nothing is "verified" without a check that says so."""

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            await rig.observe()
            held = await rig.act(expect=Expectation(text_visible="Paid"))
            assert held.result.evidence is Evidence.VERIFIED
            rig.backend.expect_next(False, "no text 'Paid'")
            await rig.observe()
            missed = await rig.act(expect=Expectation(text_visible="Paid"))
            assert missed.result.outcome is Outcome.DONE and missed.result.evidence is Evidence.OBSERVED
            assert "no text 'Paid'" in missed.result.message
            await rig.observe()
            quick = await rig.act(skip_reobserve=True)
            assert quick.result.evidence is Evidence.DISPATCH_RETURNED and quick.observation is None

    run(body)


# -- 14. every action that was started ends with a result, whatever the client does ---------------


def test_a_started_action_ends_with_a_result_when_its_caller_goes_away(sidecar: Sidecar, tmp_path: Path) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            await rig.observe()
            rig.backend.script(Dispatch.slow(0.3))
            call = asyncio.create_task(rig.act(key="pay"))
            await _until(lambda: bool(rig.backend.dispatched))
            call.cancel()  # as grpc.aio cancels the handler when the client goes away
            with pytest.raises(asyncio.CancelledError):
                await call
            (intent,) = rig.ledger.entries(kind="intent")
            await _until(lambda: bool(rig.entries(intent.action_id, "result")), timeout_s=1.0)

    run(body)


# -- 4. a crash at each kill point leaves the ledger consistent -------------------------------------


class Crash(BaseException):
    """The executor dies here: nothing after this point runs."""


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_each_point_leaves_the_ledger_consistent(sidecar: Sidecar, tmp_path: Path, point: str) -> None:
    ledger_path = tmp_path / "ledger.sqlite"

    async def crash(key: str) -> None:
        raise Crash(point)

    async def body() -> None:
        hooks = FaultHooks()
        hooks.at(point, crash, key="pay")
        before = FakeBackend()
        # The first executor: no Watch stream, so that nothing of it runs after the "crash".
        async with running(sidecar, ledger_path, backend=before, watch=False, fault=hooks) as first:
            await first.observe()
            with pytest.raises(Crash):
                await first.act(key="pay")
            first.die()
            agent, target = (first.agent, first.token), first.target
            intents = first.ledger.entries(kind="intent")
            dispatched = len(before.dispatched)
        assert dispatched == (1 if point in ("after-dispatch", "after-result") else 0)
        assert len(intents) == (0 if point == "before-intent" else 1)

        # The restart: recovery first, then the same agent on the same target.
        after = FakeBackend()
        async with running(sidecar, ledger_path, backend=after, agent=agent, target=target) as second:
            assert second.ledger.verify().ok
            blocked = second.core.unknown_actions(target)
            await second.observe()
            if point in ("after-intent", "after-dispatch"):
                # Intent without result: UNKNOWN, never re-dispatched; it blocks the target.
                (action,) = blocked
                assert second.kinds(action.action_id) == ["intent", "result"]
                assert second.ledger.entries(action_id=action.action_id, outcome="UNKNOWN")
                _refused(await second.act(key="pay-2"), Reason.RECONCILE_REQUIRED)
                await second.core.reconcile(second.session, action.action_id, Verdict.HAPPENED, "the order shows")
            else:
                assert blocked == []
            assert (await second.act(key="pay-2")).result.outcome is Outcome.DONE
            assert len(after.dispatched) == 1
            assert second.ledger.verify().ok

    run(body)


async def _until(holds: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not holds():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


def test_a_start_page_slower_than_the_session_ttl_does_not_end_the_session(sidecar: Sidecar, tmp_path: Path) -> None:
    """Sessions that end: the TTL counts from the end of a call, so a session whose start
    page takes longer than its TTL to load is not reaped while it opens."""
    from handrail.executor._guard import OpenSpec
    from handrail.executor._models import BackendKind
    from tests.executor.inproc import ORIGIN

    class SlowStart(FakeBackend):
        async def start(self, url: str, timeout_ms: int) -> None:
            await asyncio.sleep(1.6)  # the reaper looks every 0.25 s; the TTL is 1 s
            await super().start(url, timeout_ms)

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite", backend=SlowStart()) as rig:
            await rig.core.close_session(rig.session, reason="test")
            spec = OpenSpec(BackendKind.BROWSER, rig.target, f"{ORIGIN}/", None, session_ttl_ms=1_000)
            info = await rig.core.open_session(token=rig.token, agent="", target=rig.target, spec=spec)
            session = rig.core.sessions.get(info.session_id, rig.token)
            assert not session.closed and rig.backend.started == [f"{ORIGIN}/"]
            await asyncio.sleep(1.6)  # and once idle past its TTL, it is reaped
            assert session.closed

    run(body)
