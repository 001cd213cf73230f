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

import time
from collections.abc import Iterator
from typing import Any

import grpc
import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from handrail.executor import ExecutorClient, Outcome
from handrail.recorder import open_ledger
from handrail.scenarios._postgres import PrivatePostgres
from tests.executor.replica_rig import (
    EXE,
    SLOW,
    CountingApp,
    Rig,
    checking_replica,
    cut_ledger_backends,
    grant,
    in_background,
    lease_changes,
    start_rig,
)
from tests.recorder.test_ledger_cli import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def rig(postgres: PrivatePostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    yield from start_rig(postgres.dsn, tmp_path_factory.mktemp("at-the-click"))


@pytest.fixture
def app() -> Iterator[CountingApp]:
    fixture = CountingApp()
    fixture.start()
    try:
        yield fixture
    finally:
        fixture.stop()


# --- 1. the replica the executor talks to stops; a person takes over through another -------------


def test_a_takeover_through_another_replica_while_the_watch_replica_is_stopped(rig: Rig, app: CountingApp) -> None:
    """The executor's Watch is on replica 0. The agent's submit is allowed at epoch E; in
    the moment between its intent and its dispatch replica 0 is stopped and an operator
    takes over through replicas 1 and 2. The click must not reach the page, and nothing
    the stopped replica held is replayed onto it when it resumes."""
    agent, target = "agent-1", "browser:click-1"
    grant(rig, agent, target, app)
    with rig.agent(agent) as client:
        session = client.open_session(target=target, start_url=app.url + "/")
        epoch = session.info.lease_epoch
        assert epoch > 0
        pause = session.find("button", "Pause plan")
        clicked = in_background(session.click, pause, idempotency_key=SLOW)
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
            assert f"lease epoch {epoch} was superseded (epoch {taken.epoch}, held by human op)" in result.message
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


# --- 2. a replica killed -9 in the middle of the check of a single-use grant -----------------------


def test_a_replica_killed_mid_check_of_a_single_use_grant(rig: Rig, app: CountingApp) -> None:
    """The single-use grant's row is locked (a blocker transaction) so that the check of
    the agent's submit waits inside whichever replica it went to; that replica is killed
    (-9) there and the lock let go. The executor's client sends the check on to another
    replica. Across that and the agent's further tries the page sees the submit at most
    once, and each action in the ledger was dispatched at most once."""
    agent, target = "agent-2", "browser:click-2"
    grant_id = grant(rig, agent, target, app, single_use=True)
    killed = None
    with rig.agent(agent) as client:
        session = client.open_session(target=target, start_url=app.url + "/")
        pause = session.find("button", "Pause plan")
        with psycopg.connect(rig.dsn) as blocker:
            blocker.execute("SELECT 1 FROM grants WHERE grant_id = %s FOR UPDATE", (grant_id,))
            clicked = in_background(session.click, pause, idempotency_key="k1")
            killed = checking_replica(rig)
            rig.cluster.kill(killed)
            blocker.rollback()
        try:
            results = [clicked.result(timeout=30).result]
            for n in range(2, 4):  # the agent tries again, with new keys
                session.observe()
                results.append(session.click(session.find("button", "Pause plan"), idempotency_key=f"k{n}").result)
        finally:
            rig.cluster.start(killed)
        done = [r for r in results if r.outcome is Outcome.DONE]
        assert app.submits == len(done) <= 1, results
        for r in results:
            assert r.outcome in (Outcome.DONE, Outcome.REFUSED), r
            assert r.execution_started == (r.outcome is Outcome.DONE), r
            if r.outcome is Outcome.REFUSED:
                assert r.reason in ("GRANT_EXHAUSTED", "AUTHZ_UNAVAILABLE"), r
        entries = rig.entries(session.session_id)
        intents = [e["action_id"] for e in entries if e["kind"] == "intent"]
        assert len(intents) == len(set(intents)) == len(done)  # an intent only for the one dispatched
        for action in intents:
            ends = [e for e in entries if e["kind"] == "result" and e["action_id"] == action]
            assert [e["outcome"] for e in ends] in (["DONE"], ["UNKNOWN"])
        assert len(rig.dispatches(session.session_id)) == len(done)
        with psycopg.connect(rig.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT used_at_ms IS NOT NULL FROM grants WHERE grant_id = %s", (grant_id,)).fetchone()
        assert row is not None and (row[0] or not done)  # an allow used it up
        with rig.ops() as ops:  # of every replica's decisions (the killed one's too), one allow at most
            logged = ops.list_decisions(principal=agent, target=target, limit=100)
        assert len([d for d in logged if d.decision.allow and d.request.verb == "submit"]) == len(done)
        session.close()


# --- 3. every replica down: fail closed; one back: the next action goes ---------------------------


def test_every_replica_down_fails_closed_and_one_back_serves_the_next_click(rig: Rig, app: CountingApp) -> None:
    agent, target = "agent-3", "browser:click-3"
    grant(rig, agent, target, app)
    with rig.agent(agent) as client:
        session = client.open_session(target=target, start_url=app.url + "/")
        pause = session.find("button", "Pause plan")
        # Every replica dies after the allow, before the dispatch: the fence cannot read the
        # lease, so nothing is dispatched, and the answer says the sidecar is unreachable.
        clicked = in_background(session.click, pause, idempotency_key=SLOW)
        rig.wait_intent(session.session_id, SLOW)
        for i in range(3):
            rig.cluster.kill(i)
        try:
            fenced = clicked.result(timeout=30).result
            assert (fenced.outcome, fenced.reason, fenced.execution_started) == (
                Outcome.REFUSED,
                "AUTHZ_UNAVAILABLE",
                False,
            ), fenced
            assert "no authz replica answered" in fenced.message
            assert app.submits == 0
            t0 = time.monotonic()
            refused = session.click(pause, idempotency_key="k-down").result
            took = time.monotonic() - t0
            assert (refused.outcome, refused.reason, refused.execution_started) == (
                Outcome.REFUSED,
                "AUTHZ_UNAVAILABLE",
                False,
            ), refused
            assert "no authz replica answered" in refused.message
            for port in rig.cluster.ports:
                assert f"127.0.0.1:{port}" in refused.message
            assert took < 10, took
            assert app.submits == 0
            entries = rig.entries(session.session_id)
            assert [e["reason"] for e in entries if e["kind"] == "refusal"] == ["AUTHZ_UNAVAILABLE"], entries
            assert [e["key"] for e in entries if e["kind"] == "intent"] == [SLOW]
            assert [(e["key"], e["outcome"]) for e in rig.entries(session.session_id) if e["kind"] == "result"] == [
                (SLOW, "REFUSED")
            ]
            session.observe()  # reads go on
            rig.cluster.start(1)  # one replica back: the same executor goes on through it
            deadline = time.monotonic() + 10
            n = 0
            while True:
                n += 1
                went = session.click(session.find("button", "Pause plan"), idempotency_key=f"k-back-{n}").result
                if went.reason != "AUTHZ_UNAVAILABLE" or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert went.outcome is Outcome.DONE, went
            assert app.submits == 1
            assert len(rig.dispatches(session.session_id)) == 1
        finally:
            for i in (0, 1, 2):
                if rig.cluster.procs[i] is None:
                    rig.cluster.start(i)
        session.close()


# --- 4. the ledger's PostgreSQL connection cut ----------------------------------------------------


def test_the_ledger_connection_cut_never_lets_a_click_go_without_its_intent(
    rig: Rig, app: CountingApp, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, target = "agent-4", "browser:click-4"
    with open_ledger(rig.dsn, executor_id="exe-other", head_dir=rig.data) as other:  # a second chain
        other.intent("s-other", "a-other", "k", agent, 1, {"kind": "click", "ref": "e1"})
    grant(rig, agent, target, app)
    with rig.agent(agent) as client:
        session = client.open_session(target=target, start_url=app.url + "/")
        # The ledger's connections ended by the server: the append goes on a fresh one.
        assert cut_ledger_backends(rig) >= 1
        went = session.click(session.find("button", "Pause plan"), idempotency_key="k-terminated").result
        assert went.outcome is Outcome.DONE, went
        assert app.submits == 1

        # No way to the ledger's database: the intent cannot be committed, nothing is dispatched.
        session.observe()
        rig.proxy.cut()
        try:
            t0 = time.monotonic()
            with pytest.raises(grpc.RpcError) as caught:
                session.click(session.find("button", "Pause plan"), idempotency_key="k-cut")
            took = time.monotonic() - t0
        finally:
            rig.proxy.restore()
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, caught.value
        assert "ledger" in (caught.value.details() or ""), caught.value.details()
        assert took < 15, took
        assert app.submits == 1
        entries = rig.entries(session.session_id)
        assert [e for e in entries if e["key"] == "k-cut" and e["kind"] in ("intent", "result")] == []

        # Cut after the intent committed and before the result: the click went (the intent
        # is durable), its result could not be written. The action is UNKNOWN: the agent's
        # next write waits for a reconcile, and nothing is dispatched again.
        session.observe()
        clicked = in_background(session.click, session.find("button", "Pause plan"), idempotency_key=SLOW)
        intent = rig.wait_intent(session.session_id, SLOW)
        rig.proxy.cut()
        try:
            with pytest.raises(grpc.RpcError) as caught:
                clicked.result(timeout=30)
        finally:
            rig.proxy.restore()
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, caught.value
        assert app.submits == 2  # dispatched once, after its intent
        session.observe()
        blocked = session.click(session.find("button", "Pause plan"), idempotency_key="k-next").result
        assert (blocked.outcome, blocked.reason) == (Outcome.REFUSED, "RECONCILE_REQUIRED"), blocked
        assert intent["action_id"] in blocked.message
        assert app.submits == 2
        replayed = session.click(session.find("button", "Pause plan"), idempotency_key=SLOW).result
        assert (replayed.outcome, replayed.execution_started) == (Outcome.UNKNOWN, True), replayed
        assert app.submits == 2
        reconciled = session.reconcile(intent["action_id"], "HAPPENED", "the app counted the pause")
        assert reconciled.outcome is Outcome.RECONCILED
        again = session.click(session.find("button", "Pause plan"), idempotency_key="k-after").result
        assert again.outcome is Outcome.DONE, again
        assert app.submits == 3
        assert [d["key"] for d in rig.dispatches(session.session_id)] == ["k-terminated", "k-after"]
        kinds = [e["kind"] for e in rig.entries(session.session_id) if e["action_id"] == intent["action_id"]]
        assert kinds == ["intent", "reconcile"]  # the click whose result was lost: reconciled, never re-sent
        session.close()
    # Every chain in the database verifies (the executor's head file beside it).
    capsys.readouterr()
    assert run_cli(["ledger", "verify", "--db", rig.dsn, "--data-dir", str(rig.data)]) == 0
    out = capsys.readouterr().out
    assert f"executor {EXE}: ok" in out and "executor exe-other: ok" in out, out


# --- 5. take-over, hand-back and re-acquire racing a check at a replica boundary ------------------

CHANGES = ("none", "takeover", "handback", "reacquire")


def _move_lease(rig: Rig, client: ExecutorClient, target: str, agent: str, change: str, via: int) -> list[Any]:
    """Move ``target``'s lease through replica ``via``: a person takes over; then hands it
    back (to no one, or to ``agent``, whose other session re-acquires it). Returns the
    sessions it opened."""
    opened: list[Any] = []
    if change == "none":
        return opened
    with rig.ops(via) as ops:
        taken = ops.take_over(target, note="race")
        if change in ("handback", "reacquire"):
            ops.hand_back(target, taken.epoch, next_holder=agent if change == "reacquire" else "")
    if change == "reacquire":  # the same agent, another session: the lease is its again, one epoch on
        other = client.open_session(target=target, start_url="about:blank", observe=False)
        opened.append(other)
        assert other.info.lease_epoch == taken.epoch + 2, other.info
    return opened


@settings(
    max_examples=3,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rounds=st.lists(
        st.tuples(st.sampled_from(CHANGES), st.sampled_from(("before-check", "after-allow")), st.integers(0, 2)),
        min_size=2,
        max_size=3,
    )
)
@example(rounds=[("reacquire", "after-allow", 1), ("none", "after-allow", 2), ("handback", "after-allow", 0)])
def test_a_check_racing_takeover_handback_and_reacquire_never_acts_at_a_superseded_epoch(
    rig: Rig, app: CountingApp, rounds: list[tuple[str, str, int]]
) -> None:
    agent, target = "agent-5", "browser:click-5"
    grant(rig, agent, target, app)
    with rig.agent(agent) as client:
        for change, when, via in rounds:
            session = client.open_session(target=target, start_url=app.url + "/")
            epoch = session.info.lease_epoch
            assert epoch > 0, session.info
            pause = session.find("button", "Pause plan")
            before = app.submits
            opened: list[Any] = []
            try:
                if when == "before-check":
                    opened = _move_lease(rig, client, target, agent, change, via)
                    result = session.click(pause, idempotency_key="k").result
                else:
                    clicked = in_background(session.click, pause, idempotency_key=SLOW)
                    rig.wait_intent(session.session_id, SLOW)  # allowed at `epoch`; not dispatched yet
                    opened = _move_lease(rig, client, target, agent, change, via)
                    result = clicked.result(timeout=30).result
                if change == "none":
                    assert result.outcome is Outcome.DONE, result
                    assert app.submits == before + 1
                    (done,) = rig.dispatches(session.session_id)
                    assert done["epoch"] == epoch
                else:
                    assert app.submits == before, f"dispatched at superseded epoch {epoch}: {result}"
                    assert (result.outcome, result.execution_started) == (Outcome.REFUSED, False), result
                    assert result.reason in ("STALE_EPOCH", "HELD_BY_HUMAN", "STALE_OBSERVATION"), result
                    assert rig.dispatches(session.session_id) == []
            finally:
                for s in [session, *opened]:
                    s.close()
                with rig.ops() as ops:  # a person still there hands back for the next round
                    lease = ops.get_lease(target)
                    if lease.holder_kind == "human":
                        ops.hand_back(target, lease.epoch)


# --- the Watch outlives a lease change the ledger could not record ---------------------------------


def test_a_lease_change_the_ledger_refused_does_not_end_the_executors_watch(rig: Rig, app: CountingApp) -> None:
    """The ledger refuses the executor's record of a takeover (a trigger raises on it). The
    Watch must go on: the hand-back after it is recorded and told, and the next click is
    fenced as before. Before: the ledger's error ended the executor's watch task for good."""
    agent, target = "agent-6", "browser:click-6"
    grant(rig, agent, target, app)
    with rig.agent(agent) as client:
        session = client.open_session(target=target, start_url=app.url + "/")
        with psycopg.connect(rig.dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION refuse_lease_change() RETURNS trigger LANGUAGE plpgsql AS"
                " $$BEGIN RAISE EXCEPTION 'test: lease changes refused'; END$$"
            )
            conn.execute(
                "CREATE TRIGGER refuse_lease_change BEFORE INSERT ON ledger_entries FOR EACH ROW"
                " WHEN (NEW.kind = 'lease_change') EXECUTE FUNCTION refuse_lease_change()"
            )
            try:
                with rig.ops() as ops:
                    taken = ops.take_over(target, note="not recorded")
                time.sleep(1.0)  # told to the executor, which could not record it
            finally:
                conn.execute("DROP TRIGGER refuse_lease_change ON ledger_entries")
                conn.execute("DROP FUNCTION refuse_lease_change()")
        assert "takeover" not in lease_changes(rig, target)
        with rig.ops() as ops:
            ops.hand_back(target, taken.epoch)
        deadline = time.monotonic() + 5
        while "handback" not in lease_changes(rig, target):
            assert time.monotonic() < deadline, "the executor's watch ended: the hand-back was never recorded"
            time.sleep(0.05)
        session.observe()
        went = session.click(session.find("button", "Pause plan"), idempotency_key="k-after").result
        assert went.outcome is Outcome.DONE, went
        assert app.submits == 1
        session.close()
