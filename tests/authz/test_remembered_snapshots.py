"""A PostgreSQL replica decides a check on the snapshot it read last for the same agent,
target and caller, and logs the decision in one statement only if every row of that
snapshot is unchanged and no time-stamp among them falls between the clock it judged at
and the database's. Each test here makes the change a remembered snapshot would miss
(through another replica, or by moving the clock past an expiry) and asks the replica
that remembers: the very next check must act on it, and no decision made on the stale
snapshot may reach the log.

Every test here needs the session's PostgreSQL server: all are slow-marked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from handrail.authz import AuthzClient, AuthzRpcError, PgStore
from handrail.authz._lease_changes import Acquire, Renew
from handrail.authz._models import CheckInput, Decision, DecisionRecord, GrantInfo
from tests.authz.conftest import ADMIN, FakeClock
from tests.authz.test_replicas import TARGET, Replicas

pytestmark = pytest.mark.slow

AGENT = "agent-a"
HOUR = 3_600_000


@pytest.fixture
def pair(pg_dsn: Callable[[], str], tmp_path: Path) -> Iterator[Callable[..., Replicas]]:
    made: list[Replicas] = []

    def make(clock: FakeClock | None = None) -> Replicas:
        made.append(Replicas(pg_dsn(), 2, tmp_path / f"set{len(made)}", clock))
        return made[-1]

    yield make
    for r in made:
        r.close()


def remembered(r: Replicas, principal: str = AGENT) -> bool:
    """Whether replica 0 would answer the executor's next check from memory."""
    store = r.servers[0].store
    assert isinstance(store, PgStore)
    return store.check_snapshot(principal, TARGET, r.tokens["exe"], recent=True).stamp is not None


def settled(exe: AuthzClient, r: Replicas, epoch: int, verb: str = "submit") -> str:
    """Check twice through replica 0 (the second from memory); the reason, which must agree."""
    first = exe.check(AGENT, TARGET, epoch, verb).reason
    assert remembered(r)
    assert exe.check(AGENT, TARGET, epoch, verb).reason == first
    return first


# Each change: what it does through replica 1 (or to the clock), and the reason the next
# check through replica 0 must give. ``granted`` is the submit grant the agent holds.
CHANGES: dict[str, tuple[Callable[[Replicas, GrantInfo, int, FakeClock], None], str]] = {
    "grant revoked": (lambda r, g, e, c: r.client("op", 1).revoke(g.grant_id), "GRANT_REVOKED"),
    "task closed": (lambda r, g, e, c: r.client("op", 1).close_task("task-1"), "GRANT_EXPIRED"),
    "grant expired": (lambda r, g, e, c: c.advance(HOUR // 2), "GRANT_EXPIRED"),
    "taken over": (lambda r, g, e, c: r.client("op", 1).take_over(TARGET), "HELD_BY_HUMAN"),
    "lease expired": (lambda r, g, e, c: c.advance(HOUR // 4), "NO_LEASE"),
    "agent revoked": (lambda r, g, e, c: r.client("admin", 1).revoke_principal(AGENT), "UNAUTHENTICATED"),
    "lease handed to another": (
        lambda r, g, e, c: (
            r.client("exe", 1).release(TARGET, e, holder=AGENT),
            r.client("exe", 1).acquire(TARGET, holder="agent-b", ttl_ms=HOUR),
        ),
        "NO_LEASE",
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_through_another_replica_or_the_clock_acts_on_the_next_check(
    pair: Callable[..., Replicas], change: str
) -> None:
    clock = FakeClock()
    r = pair(clock)
    exe = r.client("exe", 0)
    # the lease lapses before the grant expires, unless it is the grant's expiry under test
    epoch = exe.acquire(TARGET, holder=AGENT, ttl_ms=HOUR if change == "grant expired" else HOUR // 4).epoch
    grant = r.client("op", 1).grant(
        AGENT, TARGET, ["submit"], [], expires_at_ms=clock.now + HOUR // 2, task_id="task-1"
    )
    assert settled(exe, r, epoch) == "ALLOW"
    log = r.servers[0].store
    before = len(log.list_decisions(principal=AGENT, limit=1000))
    act, reason = CHANGES[change]
    act(r, grant, epoch, clock)
    decision = exe.check(AGENT, TARGET, epoch, "submit")
    assert (decision.allow, decision.reason) == (False, reason)
    decisions = log.list_decisions(principal=AGENT, limit=1000)
    assert len(decisions) == before + 1  # the stale decision was never logged: only this one
    assert decisions[0].decision.reason == reason


def test_a_new_grant_through_another_replica_allows_the_next_check(pair: Callable[..., Replicas]) -> None:
    r = pair()
    exe = r.client("exe", 0)
    epoch = exe.acquire(TARGET, holder=AGENT, ttl_ms=HOUR).epoch
    assert settled(exe, r, epoch) == "OUT_OF_SCOPE"
    r.client("op", 1).grant(AGENT, TARGET, ["submit"], [])
    assert exe.check(AGENT, TARGET, epoch, "submit").allow


def test_a_revoked_caller_token_is_refused_on_the_next_check(pair: Callable[..., Replicas]) -> None:
    """The caller's own principal is part of what a replica remembers."""
    r = pair()
    exe = r.client("exe", 0)
    epoch = exe.acquire(TARGET, holder=AGENT, ttl_ms=HOUR).epoch
    r.client("op", 1).grant(AGENT, TARGET, ["submit"], [])
    assert settled(exe, r, epoch) == "ALLOW"
    r.client("admin", 1).revoke_principal("exe")
    with pytest.raises(AuthzRpcError) as err:
        exe.check(AGENT, TARGET, epoch, "submit")
    assert err.value.reason == "TOKEN_REVOKED"


def test_a_single_use_grant_is_never_spent_on_a_remembered_snapshot(pair: Callable[..., Replicas]) -> None:
    """A decision that changes state (consuming a grant) is made on a fresh read: one allow
    for two replicas however their memories stand."""
    r = pair()
    exe0, exe1 = r.client("exe", 0), r.client("exe", 1)
    epoch = exe0.acquire(TARGET, holder=AGENT, ttl_ms=HOUR).epoch
    assert settled(exe0, r, epoch) == "OUT_OF_SCOPE"
    assert exe1.check(AGENT, TARGET, epoch, "submit").reason == "OUT_OF_SCOPE"
    r.client("op", 1).grant(AGENT, TARGET, ["submit"], [], single_use=True)
    outcomes = [exe1.check(AGENT, TARGET, epoch, "submit").reason, exe0.check(AGENT, TARGET, epoch, "submit").reason]
    assert outcomes == ["ALLOW", "GRANT_EXHAUSTED"]


def test_the_store_logs_a_remembered_decision_only_while_its_snapshot_holds(pg_dsn: Callable[[], str]) -> None:
    """The store's contract, without the authorizer: ``record_checked`` on a remembered
    snapshot appends when nothing changed, and appends nothing (False) once a row it read
    changed through another store or the clock crossed a time-stamp it judged."""
    dsn = pg_dsn()
    clock = FakeClock()
    with PgStore(dsn, clock=clock) as a, PgStore(dsn, clock=clock) as b:
        exe = a.add_principal("exe", "executor")
        a.add_principal(AGENT, "agent")
        grant = a.add_grant(GrantInfo("", AGENT, TARGET, ("submit",), expires_at_ms=clock.now + 1000), ADMIN.name)
        a.check_snapshot(AGENT, TARGET, exe)  # read once: remembered

        def record(*, then_ms: int = 0, judged_at: int | None = None) -> bool:
            """Decide on the remembered snapshot, move the clock ``then_ms``, log it."""
            snap = a.check_snapshot(AGENT, TARGET, exe, recent=True)
            assert snap.stamp is not None and [g.grant_id for g in snap.grants] == [grant.grant_id]
            if judged_at is not None:
                snap = snap._replace(now=judged_at)
            clock.advance(then_ms)
            request = CheckInput(AGENT, TARGET, 0, "submit")
            decision_id = a.new_decision_id()
            record = DecisionRecord(decision_id, snap.now, "exe", request, Decision(True, "ALLOW", "", decision_id))
            done = a.record_checked(record, snap)
            logged = decision_id in {d.decision_id for d in a.list_decisions(limit=100)}
            assert done == logged
            return done

        clock.advance(950)
        assert record(then_ms=49)  # judged 50 ms before the grant's expiry, logged 1 ms before it
        assert not record(then_ms=1)  # judged 1 ms before the expiry, logged at it
        clock.advance(-1)
        assert not record(judged_at=clock.now - 60_000)  # judged at a clock too far from the database's
        assert record()
        b.revoke_grant(grant.grant_id)
        assert not record()  # the grant's row changed through another store
        fresh = a.check_snapshot(AGENT, TARGET, exe)
        assert fresh.stamp is None and fresh.grants[0].revoked


def test_a_change_through_the_same_store_is_read_afresh(pg_dsn: Callable[[], str]) -> None:
    """A lease renewal (an executor's, every few seconds), a new or revoked grant, or a
    rotated token made through the replica that remembers: it forgets the snapshots of
    those rows, and the next check reads afresh (two statements) with the change in it,
    instead of deciding on the old snapshot, failing its insert and reading again (three).
    Another target's snapshot stays remembered."""
    dsn = pg_dsn()
    clock = FakeClock()
    with PgStore(dsn, clock=clock) as a:
        exe = a.add_principal("exe", "executor")
        a.add_principal(AGENT, "agent")
        grant = a.add_grant(GrantInfo("", AGENT, TARGET, ("submit",)), ADMIN.name)
        a.add_grant(GrantInfo("", AGENT, "browser:other", ("submit",)), ADMIN.name)
        _, lease = a.change_lease(TARGET, Acquire(AGENT, HOUR))

        def read(target: str = TARGET) -> tuple[bool, int, list[bool]]:
            """(whether remembered, the lease's expiry, whether each grant is revoked)."""
            snap = a.check_snapshot(AGENT, target, exe, recent=True)
            expiry = snap.lease.expires_at_ms if snap.lease is not None else 0
            return snap.stamp is not None, expiry, [g.revoked for g in snap.grants]

        a.check_snapshot(AGENT, TARGET, exe)
        a.check_snapshot(AGENT, "browser:other", exe)
        assert read() == (True, lease.expires_at_ms, [False])
        clock.advance(1_000)
        _, renewed = a.change_lease(TARGET, Renew(AGENT, lease.epoch, HOUR))
        assert renewed.expires_at_ms == lease.expires_at_ms + 1_000
        assert read() == (False, renewed.expires_at_ms, [False])  # before: (True, the old expiry, ...)
        assert read("browser:other")[0]  # another target's lease did not change
        assert read()[0]
        a.revoke_grant(grant.grant_id)
        assert read() == (False, renewed.expires_at_ms, [True])
        assert read()[0]
        a.add_grant(GrantInfo("", AGENT, TARGET, ("input",)), ADMIN.name)
        assert read() == (False, renewed.expires_at_ms, [True, False])
        assert read()[0]
        a.rotate_token("exe")
        assert not a.check_snapshot(AGENT, "browser:other", exe, recent=True).stamp
