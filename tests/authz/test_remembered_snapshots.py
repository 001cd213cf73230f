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

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from handrail.authz import AuthzClient, AuthzRpcError, PgStore
from handrail.authz._lease_changes import Acquire, Renew
from handrail.authz._models import CheckInput, Decision, DecisionRecord, GrantInfo
from handrail.authz._pg_schema import ENDED_GRANT_RETENTION_MS
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


def _executor_agent_and_grant(store: PgStore) -> tuple[str, GrantInfo]:
    """An executor ``exe`` (its token returned), the agent, and its submit grant on TARGET."""
    exe = store.add_principal("exe", "executor")
    store.add_principal(AGENT, "agent")
    return exe, store.add_grant(GrantInfo("", AGENT, TARGET, ("submit",)), ADMIN.name)


def _remembered_record(store: PgStore, token: str, clock: FakeClock, then_ms: int = 0) -> bool:
    """Decide on ``store``'s remembered snapshot, move the clock ``then_ms``, log it:
    whether the decision was logged (it must be in the log exactly then)."""
    snap = store.check_snapshot(AGENT, TARGET, token, recent=True)
    assert snap.stamp is not None
    clock.advance(then_ms)
    decision_id = store.new_decision_id()
    request = CheckInput(AGENT, TARGET, 0, "submit")
    record = DecisionRecord(decision_id, snap.now, "exe", request, Decision(True, "ALLOW", "", decision_id))
    done = store.record_checked(record, snap)
    assert done == (decision_id in {d.decision_id for d in store.list_decisions(limit=100)})
    return done


# Writes to the grants table made by no store at all (an operator's psql session, a
# sidecar of another version): each must void what a replica remembers of the agent.
RAW_GRANT_WRITES = {
    "a note changed": "UPDATE grants SET note = 'edited by hand' WHERE principal = %(agent)s",
    "a grant deleted": "DELETE FROM grants WHERE principal = %(agent)s",
    "a grant inserted": (
        "INSERT INTO grants (grant_id, principal, target, verbs, origins, expires_at_ms, granted_by, note,"
        " created_at_ms, scope, single_use, task_id, is_pattern) VALUES ('by-hand', %(agent)s, 'browser:*',"
        """ '["submit"]', '[]', 0, 'psql', '', 0, '{}', false, '', true)"""
    ),
    "a grant moved to another principal": "UPDATE grants SET principal = 'agent-b' WHERE principal = %(agent)s",
    "the table truncated": "TRUNCATE grants",
}


@pytest.mark.parametrize("write", list(RAW_GRANT_WRITES))
def test_a_grant_written_by_any_statement_voids_a_remembered_snapshot(pg_dsn: Callable[[], str], write: str) -> None:
    """A remembered snapshot holds while the agent's row version does; every statement on
    the grants table, whoever runs it, writes the row of each principal whose grants it
    touched (before and after the change), so none slips past."""
    dsn = pg_dsn()
    clock = FakeClock()
    with PgStore(dsn, clock=clock) as a:
        exe, _ = _executor_agent_and_grant(a)
        a.add_principal("agent-b", "agent")
        a.add_grant(GrantInfo("", "agent-b", TARGET, ("submit",)), ADMIN.name)
        a.check_snapshot(AGENT, TARGET, exe)
        assert _remembered_record(a, exe, clock)
        with psycopg.connect(dsn, autocommit=True) as conn:
            done = conn.execute(RAW_GRANT_WRITES[write], {"agent": AGENT})
            assert done.rowcount == (-1 if write == "the table truncated" else 1)
        assert not _remembered_record(a, exe, clock)
        a.check_snapshot(AGENT, TARGET, exe)  # read afresh: remembered again
        assert _remembered_record(a, exe, clock)


def test_a_grant_that_ages_out_of_the_candidates_voids_a_remembered_snapshot(pg_dsn: Callable[[], str]) -> None:
    """A grant that ended is read with a check (to say why it no longer allows) for
    ENDED_GRANT_RETENTION_MS, then no more: a decision judged while it was a candidate is
    not logged once the clock has crossed that moment, though no row changed."""
    dsn = pg_dsn()
    clock = FakeClock()
    with PgStore(dsn, clock=clock) as a:
        exe, grant = _executor_agent_and_grant(a)
        revoked = a.revoke_grant(grant.grant_id)
        clock.advance(ENDED_GRANT_RETENTION_MS - 30)
        assert [g.grant_id for g in a.check_snapshot(AGENT, TARGET, exe).grants] == [grant.grant_id]
        assert _remembered_record(a, exe, clock, then_ms=10)  # still a candidate when logged
        assert not _remembered_record(a, exe, clock, then_ms=25)  # judged before, logged after
        assert clock.now >= revoked.revoked_at_ms + ENDED_GRANT_RETENTION_MS
        assert a.check_snapshot(AGENT, TARGET, exe).grants == []


@pytest.mark.parametrize("write", ["a revocation by raw SQL", "a task closed through a store"])
def test_a_principal_created_while_its_grants_are_written_waits_for_the_write(
    pg_dsn: Callable[[], str], write: str
) -> None:
    """A grant may name a principal that does not exist yet (an import). Were the principal
    created while a write to that grant is in progress, the write's trigger would find no
    row to write, a replica could read the agent with the grant as it was, and a decision
    remembered on that read would still be logged after the write committed. Creating the
    principal waits for the write instead (a helper's review found the race: both ways
    below logged an allow after the revocation or the closing had committed)."""
    dsn = pg_dsn()
    with PgStore(dsn) as a, PgStore(dsn) as b:
        exe = a.add_principal("exe", "executor")
        a.add_principal("agent-b", "agent")
        (grant, _) = a.add_grants(
            [
                GrantInfo("", AGENT, TARGET, ("submit",), task_id="task-1"),
                GrantInfo("", "agent-b", TARGET, ("submit",), task_id="task-1"),
            ],
            ADMIN.name,
        )
        with psycopg.connect(dsn) as held:  # one transaction, until commit or rollback
            done: list[object] = []
            closing = threading.Thread(target=lambda: done.append(b.close_task("task-1")))
            if write == "a revocation by raw SQL":
                revoke = "UPDATE grants SET revoked_at_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint"
                held.execute(revoke + " WHERE grant_id = %s", (grant.grant_id,))
            else:  # close_task's trigger waits on agent-b's row, held here
                held.execute("SELECT 1 FROM principals WHERE name = 'agent-b' FOR UPDATE")
                closing.start()
                with psycopg.connect(dsn, autocommit=True) as watch:  # until its trigger waits
                    waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    deadline = time.monotonic() + 10
                    while watch.execute(waiting).fetchone() == (0,) and time.monotonic() < deadline:
                        time.sleep(0.01)
            created = threading.Thread(target=lambda: done.append(a.add_principal(AGENT, "agent")))
            created.start()
            created.join(0.5)
            assert created.is_alive()  # the creation waits for the write in progress
            if write == "a revocation by raw SQL":
                held.commit()
            else:
                held.rollback()  # lets close_task take agent-b's row and commit
            created.join(10)
            if closing.ident is not None:  # it may commit after the creation does
                closing.join(10)
            assert not created.is_alive() and not closing.is_alive()
            assert len(done) == (1 if write == "a revocation by raw SQL" else 2)
        snap = a.check_snapshot(AGENT, TARGET, exe)  # the first read that finds the agent
        assert snap.agent is not None and [g.grant_id for g in snap.grants] == [grant.grant_id]
        assert not snap.grants[0].is_active(snap.now)


def test_a_grant_write_waits_for_its_principal_being_created(pg_dsn: Callable[[], str]) -> None:
    """The other order: a principal's creation is in progress when a write to its grant
    starts. The write's trigger waits for the creation to commit and then writes the new
    row, so a snapshot read while the write is still open is voided when it commits."""
    dsn = pg_dsn()
    with PgStore(dsn) as a:
        exe = a.add_principal("exe", "executor")
        (grant,) = a.add_grants([GrantInfo("", AGENT, TARGET, ("submit",))], ADMIN.name)
        with psycopg.connect(dsn) as creating, psycopg.connect(dsn) as writing:
            creating.execute(
                "INSERT INTO principals (name, role, token_sha256, created_at_ms) VALUES (%s, 'agent', %s, 0)",
                (AGENT, "0" * 64),
            )
            revoke = "UPDATE grants SET revoked_at_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint"
            statement = threading.Thread(
                target=lambda: writing.execute(revoke + " WHERE grant_id = %s", (grant.grant_id,))
            )
            statement.start()
            statement.join(0.5)
            assert statement.is_alive()  # its trigger waits for the creation
            creating.commit()
            statement.join(10)
            assert not statement.is_alive()
            snap = a.check_snapshot(AGENT, TARGET, exe)  # the write is not committed yet
            assert snap.agent is not None and snap.grants[0].is_active(snap.now)
            writing.commit()
        assert not _remembered_record(a, exe, FakeClock())  # the agent's row moved with it


AGENTS = ["agent-a", "agent-b", "agent-c", "agent-d", "agent-e"]


def test_concurrent_grant_writers_never_deadlock_on_the_principals_rows(pg_dsn: Callable[[], str]) -> None:
    """Each statement on the grants table takes its principals' locks and writes their rows
    (migration 3). Four stores at once add grants for two of five principals in either
    order (one transaction each), close tasks spanning several (one statement, whose
    trigger takes their locks together), and consume single-use grants: every call
    succeeds (PostgreSQL would end one side of a deadlock with an error), and every grant
    is there. (The five names' hashes are not in name order, so a lock order by hash
    would not agree with the order add_grants writes in.)"""
    dsn = pg_dsn()
    with PgStore(dsn) as setup:
        for name in AGENTS:
            setup.add_principal(name, "agent")
    rounds = 30
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            with PgStore(dsn, pool_size=2) as store:
                for i in range(rounds):
                    names = [AGENTS[(w + i) % 5], AGENTS[(w + i + 1) % 5]]
                    if i % 2:
                        names.reverse()
                    task = f"task-{w}-{i % 4}"
                    added = store.add_grants(
                        [
                            GrantInfo("", n, f"browser:{w}-{i}", ("submit",), single_use=True, task_id=task)
                            for n in names
                        ],
                        ADMIN.name,
                    )
                    assert [g.principal for g in added] == names  # in the order given
                    decision_id = store.new_decision_id()
                    request = CheckInput(names[0], f"browser:{w}-{i}", 0, "submit")
                    record = DecisionRecord(
                        decision_id, store.now_ms(), "exe", request, Decision(True, "ALLOW", "", decision_id)
                    )
                    assert store.commit_check(record, consume=added[0].grant_id)
                    store.close_task(task)
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    with PgStore(dsn) as store:
        assert len(store.list_grants(include_inactive=True)) == 4 * rounds * 2


def test_a_change_through_the_same_store_is_read_afresh(pg_dsn: Callable[[], str]) -> None:
    """A lease renewal (an executor's, every few seconds), a new, revoked or consumed grant,
    or a rotated token made through the replica that remembers: it forgets the snapshots of
    those rows, and the next check reads afresh (two statements) with the change in it,
    instead of deciding on the old snapshot, failing its insert and reading again (three).
    Another target's snapshot stays remembered."""
    dsn = pg_dsn()
    clock = FakeClock()
    with PgStore(dsn, clock=clock) as a:
        exe, grant = _executor_agent_and_grant(a)
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
        single = a.add_grant(GrantInfo("", AGENT, "browser:other", ("submit",), single_use=True), ADMIN.name)
        assert not read()[0] and not read("browser:other")[0]  # read afresh, remembered again
        assert read()[0] and read("browser:other")[0]
        decision_id = a.new_decision_id()
        request = CheckInput(AGENT, "browser:other", 0, "submit")
        record = DecisionRecord(decision_id, clock.now, "exe", request, Decision(True, "ALLOW", "", decision_id))
        assert a.commit_check(record, consume=single.grant_id)  # writes the agent's row
        assert not read()[0] and not read("browser:other")[0]  # every target of the agent afresh
        assert read()[0]
        a.rotate_token("exe")
        assert not a.check_snapshot(AGENT, "browser:other", exe, recent=True).stamp
