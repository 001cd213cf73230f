"""Sidecar replicas over one PostgreSQL database, in-process: they agree on leases,
single-use grants, approvals and revocations; Watch reaches every replica and resumes
from a sequence number; the lease statements are the transitions of _core; a cut database
connection is survived or refused as UNAVAILABLE, never INTERNAL.

Every test here needs the session's PostgreSQL server: all are slow-marked.
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handrail.authz import (
    AuthzClient,
    AuthzRpcError,
    AuthzServer,
    AuthzUnavailableError,
    InvalidArgumentError,
    LeaseConflictError,
    LeaseInfo,
    PgStore,
    WatchEventInfo,
    parse_addresses,
    serve,
)
from handrail.authz._lease_changes import Acquire, Expire, HandBack, Release, Renew, ReportActivity, TakeOver
from handrail.authz._models import GrantInfo
from handrail.scenarios._postgres import terminate
from tests.authz.conftest import ADMIN, LEASE_GRANT_NOTE, FakeClock

pytestmark = pytest.mark.slow

TARGET = "browser:1"
AGENTS = ("agent-a", "agent-b", *(f"agent-{i}" for i in range(12)))


class Replicas:
    """N sidecars in-process over one schema, and tokens valid on all of them."""

    def __init__(self, dsn: str, n: int, tmp: Path, clock: FakeClock | None = None) -> None:
        self.dsn = dsn
        self.servers: list[AuthzServer] = []
        self.addresses: list[str] = []
        for i in range(n):
            server, port = serve(tmp / f"r{i}", "127.0.0.1:0", store=dsn, clock=clock)
            self.servers.append(server)
            self.addresses.append(f"127.0.0.1:{port}")
        store = self.servers[0].store
        self.tokens = {
            "op": store.add_principal("op", "operator"),
            "exe": store.add_principal("exe", "executor"),
            "admin": store.add_principal("admin", "admin"),
        }
        # Only a live agent with a grant on a target may take its lease: each agent the
        # tests name gets a standing read grant on every target (as the sidecar fixture's).
        for agent in AGENTS:
            store.add_principal(agent, "agent")
            self.servers[0].authorizer.grant(ADMIN, GrantInfo("", agent, "*", ("read",), note=LEASE_GRANT_NOTE))
        self._clients: list[AuthzClient] = []

    def client(self, who: str, *which: int) -> AuthzClient:
        """A client of the replicas ``which`` (all when none), as ``who``."""
        picked = [self.addresses[i] for i in which] if which else self.addresses
        c = AuthzClient(",".join(picked), self.tokens[who])
        self._clients.append(c)
        return c

    def close(self) -> None:
        for c in self._clients:
            c.close()
        for s in self.servers:
            s.stop(None)


@pytest.fixture
def replicas(pg_dsn: Callable[[], str], tmp_path: Path) -> Iterator[Callable[..., Replicas]]:
    made: list[Replicas] = []

    def make(n: int = 2, clock: FakeClock | None = None) -> Replicas:
        r = Replicas(pg_dsn(), n, tmp_path / f"set{len(made)}", clock)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def test_replicas_agree_on_leases_grants_and_revocations(replicas: Callable[..., Replicas]) -> None:
    r = replicas(2)
    a, b = r.client("exe", 0), r.client("exe", 1)
    op_a, op_b = r.client("op", 0), r.client("op", 1)
    lease = a.acquire(TARGET, holder="agent-a", ttl_ms=60_000)
    with pytest.raises(AuthzRpcError, match="held by agent 'agent-a'"):
        b.acquire(TARGET, holder="agent-b")
    grant = op_a.grant("agent-a", TARGET, ["submit"], [])
    assert b.check("agent-a", TARGET, lease.epoch, "submit").allow
    op_b.revoke(grant.grant_id)  # no replica caches the grant: the very next check sees it
    assert a.check("agent-a", TARGET, lease.epoch, "submit").reason == "GRANT_REVOKED"
    op_a.grant("agent-a", TARGET, ["submit"], [])
    human = op_b.take_over(TARGET)
    assert human.epoch == lease.epoch + 1
    stale = a.check("agent-a", TARGET, lease.epoch, "submit")
    assert not stale.allow and stale.reason == "HELD_BY_HUMAN" and stale.lease_epoch == human.epoch
    op_a.hand_back(TARGET, human.epoch, next_holder="agent-b")
    with pytest.raises(AuthzRpcError, match="handed back to 'agent-b'"):
        b.acquire(TARGET, holder="agent-a")
    assert a.acquire(TARGET, holder="agent-b").epoch == human.epoch + 2


def test_a_revocation_through_one_replica_acts_on_the_next_call_to_another(
    replicas: Callable[..., Replicas],
) -> None:
    """No replica remembers a token or a principal: the agent a check acts for is read in
    the check's own snapshot, its token at every call."""
    r = replicas(2)
    exe_a, admin_b = r.client("exe", 0), r.client("admin", 1)
    epoch = exe_a.acquire(TARGET, holder="agent-b", ttl_ms=60_000).epoch
    r.client("op", 1).grant("agent-b", TARGET, ["submit"], [])
    agent_token = r.servers[0].store.rotate_token("agent-b")[1]
    agent = AuthzClient(r.addresses[0], agent_token)
    try:
        assert agent.who_am_i() == ("agent-b", "agent")
        assert exe_a.check("agent-b", TARGET, epoch, "submit").allow
        admin_b.revoke_principal("agent-b")
        refused = exe_a.check("agent-b", TARGET, epoch, "submit")
        assert not refused.allow and refused.reason == "UNAUTHENTICATED"
        with pytest.raises(AuthzRpcError) as err:
            agent.who_am_i()
        assert err.value.reason == "TOKEN_REVOKED"
    finally:
        agent.close()


def test_single_use_grant_is_allowed_once_across_replicas(replicas: Callable[..., Replicas]) -> None:
    r = replicas(3)
    exe = r.client("exe")
    epoch = exe.acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    r.client("op").grant("agent-a", TARGET, ["submit"], [], single_use=True)
    clients = [r.client("exe", i % 3) for i in range(30)]
    go = threading.Barrier(30)

    def one(c: AuthzClient) -> bool:
        go.wait()
        return c.check("agent-a", TARGET, epoch, "submit").allow

    with ThreadPoolExecutor(30) as pool:
        allows = sum(pool.map(one, clients))
    assert allows == 1
    assert r.servers[1].store.list_decisions(limit=100)[-1].request.principal == "agent-a"
    assert len(r.servers[2].store.list_decisions(limit=100)) == 30  # every decision is logged


def test_concurrent_acquires_through_replicas_have_one_winner(replicas: Callable[..., Replicas]) -> None:
    r = replicas(3)
    won: list[LeaseInfo] = []
    go = threading.Barrier(12)

    def grab(i: int) -> None:
        client = r.client("exe", i % 3)
        go.wait()
        with contextlib.suppress(AuthzRpcError):
            won.append(client.acquire("t-race", holder=f"agent-{i}"))

    threads = [threading.Thread(target=grab, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and won[0].epoch == 1


def test_an_approval_is_decided_once_across_replicas(replicas: Callable[..., Replicas]) -> None:
    r = replicas(2)
    exe = r.client("exe", 0)
    r.client("op").grant("agent-a", TARGET, ["submit"], [], require_approval_verbs=["submit"])
    epoch = exe.acquire(TARGET, holder="agent-a", ttl_ms=60_000).epoch
    pending = exe.check("agent-a", TARGET, epoch, "submit", fingerprint="f")
    results: queue.Queue[str] = queue.Queue()

    def decide(i: int) -> None:
        client = r.client("op", i % 2)
        try:
            (client.approve if i % 2 else client.deny)(pending.approval_id)
            results.put("ok")
        except AuthzRpcError as exc:
            results.put(exc.code_name)

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outcomes = [results.get() for _ in range(8)]
    final = r.client("op", 1).get_approval(pending.approval_id).status
    winners = [i for i in range(8) if (i % 2 == 1) == (final == "APPROVED")]
    assert outcomes.count("ok") == len(winners) and outcomes.count("FAILED_PRECONDITION") == 8 - len(winners)


class _Watch:
    def __init__(self, client: AuthzClient, since_seq: int = 0) -> None:
        self.events: queue.Queue[WatchEventInfo] = queue.Queue()
        self._stream = client.watch([TARGET], since_seq)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            for e in self._stream:
                self.events.put(e)
        except Exception:
            pass

    def next(self, timeout: float = 3.0) -> WatchEventInfo:
        return self.events.get(timeout=timeout)

    def close(self) -> None:
        self._stream.close()


def test_watch_reaches_every_replica_and_resumes_from_a_seq(replicas: Callable[..., Replicas]) -> None:
    r = replicas(2)
    on_b = _Watch(r.client("exe", 1))
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        r.client("op", 0).take_over(TARGET, note="from replica 0")
        event = on_b.next()
        while event.kind == "grant":  # the fixture's grants, made through replica 0, may reach
            event = on_b.next()  # replica 1 after this stream began (a loaded machine)
        assert (event.kind, event.change) == ("lease", "takeover") and time.monotonic() - t0 < 1.0
        r.client("op", 0).hand_back(TARGET, event.lease.epoch if event.lease else 0)
        r.client("exe", 1).acquire(TARGET, holder="agent-a")
        changes = [on_b.next().change, on_b.next().change]
        assert changes == ["handback", "acquire"]
    finally:
        on_b.close()
    # a watcher that saw only the takeover resumes on the other replica: nothing is lost
    again = _Watch(r.client("exe", 0), since_seq=event.seq)
    try:
        assert [again.next().change, again.next().change] == ["handback", "acquire"]
    finally:
        again.close()


def test_watch_survives_the_listener_losing_its_connection(replicas: Callable[..., Replicas]) -> None:
    r = replicas(2)
    on_b = _Watch(r.client("exe", 1))
    try:
        time.sleep(0.2)
        with psycopg.connect(r.dsn, autocommit=True) as conn:
            cut = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = 'handrail-authz-listener' AND pid <> pg_backend_pid()"
            ).fetchone()
        assert cut is not None and cut[0] >= 2  # both replicas' listeners
        op = r.client("op", 0)
        seen = []
        for _ in range(3):  # changes made while the listeners reconnect
            lease = op.take_over(TARGET)
            op.hand_back(TARGET, lease.epoch)
        for _ in range(6):
            seen.append(on_b.next(timeout=10.0).change)
        assert seen == ["takeover", "handback"] * 3
    finally:
        on_b.close()


def test_a_cut_database_connection_is_unavailable_never_internal(replicas: Callable[..., Replicas]) -> None:
    r = replicas(1)
    exe, op = r.client("exe"), r.client("op")
    epoch = exe.acquire(TARGET, holder="agent-a", ttl_ms=60_000).epoch
    op.grant("agent-a", TARGET, ["submit"], [])
    with psycopg.connect(r.dsn, autocommit=True) as conn:
        terminate(conn, "application_name = 'handrail-authz'")
    for _ in range(5):  # the pool's dead connections are replaced; checks go on
        with contextlib.suppress(AuthzUnavailableError):  # refused as UNAVAILABLE: fail-closed
            assert exe.check("agent-a", TARGET, epoch, "submit").allow
    assert exe.check("agent-a", TARGET, epoch, "submit").allow


def test_a_client_fails_over_and_fails_closed_within_one_deadline(replicas: Callable[..., Replicas]) -> None:
    r = replicas(3)
    client = AuthzClient(",".join(r.addresses), r.tokens["exe"], timeout_s=1.0)
    try:
        epoch = client.acquire(TARGET, holder="agent-a", ttl_ms=60_000).epoch
        r.servers[0].stop(None)
        r.servers[1].stop(None)
        for _ in range(6):  # round robin lands on the stopped ones too: each call fails over
            assert client.get_lease(TARGET).epoch == epoch
        r.servers[2].stop(None)
        t0 = time.monotonic()
        with pytest.raises(AuthzUnavailableError, match="no authz replica answered"):
            client.check("agent-a", TARGET, epoch, "submit")
        assert time.monotonic() - t0 < 1.5  # one deadline at most, not one per replica
    finally:
        client.close()


@pytest.mark.parametrize(
    ("given", "found"),
    [
        ("a:7700, b:7700,,a:7700,", ("a:7700", "b:7700")),  # blanks and repeats dropped
        (["[::1]:7700", " 10.0.0.2:1 "], ("[::1]:7700", "10.0.0.2:1")),
        ("unix:/run/handrail/authz.sock", ("unix:/run/handrail/authz.sock",)),
    ],
)
def test_replica_addresses_are_a_list_of_host_port(given: str | list[str], found: tuple[str, ...]) -> None:
    assert parse_addresses(given) == found


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (" , ,", "no sidecar address given"),
        ([], "no sidecar address given"),
        ("a:7700,b:99999", "'b:99999': the port must be 1 to 65535"),  # grpc would dial 34463
        ("a:0", "the port must be 1 to 65535"),
        ("a:+80", "the port must be 1 to 65535"),
        ("a:\uff17\uff17", "the port must be 1 to 65535"),  # full-width digits
        ("localhost", "'localhost' is not HOST:PORT"),  # grpc would dial 443
        (":7700", "is not HOST:PORT"),
        ("::1:7700", "an IPv6 host goes in brackets"),
    ],
)
def test_a_replica_address_that_is_not_host_port_is_refused(given: str | list[str], says: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"^authz address: .*{re.escape(says)}"):
        parse_addresses(given)
    with pytest.raises(InvalidArgumentError, match=f"^authz address: .*{re.escape(says)}"):
        AuthzClient(given, "token")


def test_a_grant_is_not_resent_to_another_replica_when_it_may_have_landed() -> None:
    import grpc

    from handrail.authz._balance import may_resend

    class Lost(grpc.RpcError):
        def __init__(self, details: str) -> None:
            self._details = details

        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNAVAILABLE

        def details(self) -> str:
            return self._details

    assert not may_resend("Grant", Lost("Socket closed"))
    assert not may_resend("HandBack", Lost("Connection reset by peer"))
    assert may_resend("Grant", Lost("failed to connect to all addresses; last error: connection refused"))
    assert may_resend("Check", Lost("Socket closed"))


# --- the statements are the transitions -------------------------------------------------------

_HOLDERS = st.sampled_from(["agent-a", "agent-b", "alice", "desk:browser:1"])
_ROWS = st.one_of(
    st.none(),
    st.builds(
        lambda kind, holder, epoch, left, nxt: (kind, holder if kind else "", epoch, left, nxt),
        st.sampled_from(["", "agent", "human"]),
        _HOLDERS,
        st.integers(1, 5),
        st.integers(-2_000, 2_000),
        st.sampled_from(["", "agent-a", "agent-b"]),
    ),
)
_CHANGES = st.one_of(
    st.builds(Acquire, st.sampled_from(["agent-a", "agent-b"]), st.sampled_from([0, 1_000, 5_000])),
    st.builds(Renew, st.sampled_from(["agent-a", "agent-b"]), st.integers(0, 6), st.sampled_from([0, 1_000])),
    st.builds(Release, st.sampled_from(["agent-a", "agent-b"]), st.integers(0, 6)),
    st.builds(TakeOver, st.sampled_from(["alice", "bob"]), st.sampled_from([0, 2_000])),
    st.builds(ReportActivity, st.just(""), st.sampled_from([0, 2_000])),
    st.builds(HandBack, st.integers(0, 6), st.sampled_from(["", "agent-a"])),
    st.just(Expire()),
)


@pytest.fixture
def statement_store(pg_dsn: Callable[[], str]) -> Iterator[tuple[PgStore, FakeClock]]:
    clock = FakeClock()
    store = PgStore(pg_dsn(), clock=clock, pool_size=2)
    yield store, clock
    store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=_ROWS, change=_CHANGES)
def test_each_lease_statement_is_its_transition(
    statement_store: tuple[PgStore, FakeClock], row: tuple[str, str, int, int, str] | None, change: object
) -> None:
    store, clock = statement_store
    now = clock.now
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM leases")
        if row is not None:
            kind, holder, epoch, left, nxt = row
            conn.execute(
                "INSERT INTO leases (target, holder_kind, holder, epoch, expires_at_ms, next_holder, updated_at_ms)"
                " VALUES (%s, %s, %s, %s, %s, %s, 0)",
                (TARGET, kind, holder, epoch, (now + left) if kind else 0, nxt),
            )
    current = LeaseInfo(TARGET, *row[:2], row[2], (now + row[3]) if row[0] else 0, row[4]) if row else LeaseInfo(TARGET)
    try:
        expected: LeaseInfo | str = change(current, now)  # type: ignore[operator]
    except LeaseConflictError:
        expected = "conflict"
    try:
        before, after = store.change_lease(TARGET, change)  # type: ignore[arg-type]
        got: LeaseInfo | str = store.lease_row(TARGET) or LeaseInfo(TARGET)
        assert before == current.effective(now)
        assert after == (expected.effective(now) if isinstance(expected, LeaseInfo) else after)
    except LeaseConflictError:
        got = "conflict"
    assert got == expected
