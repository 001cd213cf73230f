"""A lost Check answer across PostgreSQL replicas (authz/_replay.py): one replica commits
the allow, another answers the resend with it; identical checks racing on three replicas
consume once; a real replica killed (-9) right after its commit, before its answer left,
costs the action nothing: the client's failover resends the check and gets that allow.

Before authz/_replay.py each resend here was refused GRANT_EXHAUSTED.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from handrail.authz import AuthzClient, Decision
from tests.authz import test_replica_faults, test_replicas
from tests.authz.test_replica_faults import Cluster
from tests.authz.test_replicas import Replicas
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

cluster = test_replica_faults.cluster  # three `authz serve` processes over one fresh schema
replicas = test_replicas.replicas  # in-process replicas over one fresh schema

TARGET = "browser:1"
ACTION = {"url": "http://127.0.0.1:8000/pay", "action_id": "a_1", "fingerprint": "fp-1", "observation_id": "s:1"}


def test_an_allow_committed_through_one_replica_is_replayed_by_another(replicas: Callable[..., Replicas]) -> None:
    r = replicas(3)
    epoch = r.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    r.client("op").grant("agent-a", TARGET, ["submit"], [], single_use=True)
    first = r.client("exe", 0).check("agent-a", TARGET, epoch, "submit", **ACTION)
    assert first.allow and first.grant_consumed
    for i in (1, 2):
        again = r.client("exe", i).check("agent-a", TARGET, epoch, "submit", **ACTION)
        assert again.allow and again.replayed and again.decision_id == first.decision_id, again
    other = r.client("exe", 1).check("agent-a", TARGET, epoch, "submit", **{**ACTION, "action_id": "a_2"})
    assert not other.allow and other.reason == "GRANT_EXHAUSTED"


def test_identical_checks_racing_on_three_replicas_consume_once(replicas: Callable[..., Replicas]) -> None:
    r = replicas(3)
    epoch = r.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    grant = r.client("op").grant("agent-a", TARGET, ["submit"], [], single_use=True)
    clients = [r.client("exe", i % 3) for i in range(30)]
    go = threading.Barrier(len(clients))

    def one(c: AuthzClient) -> Decision:
        go.wait()
        return c.check("agent-a", TARGET, epoch, "submit", **ACTION)

    with ThreadPoolExecutor(len(clients)) as pool:
        decisions = list(pool.map(one, clients))
    assert all(d.allow for d in decisions), {d.reason for d in decisions}
    assert len({d.decision_id for d in decisions}) == 1 and sum(not d.replayed for d in decisions) == 1
    logged = r.servers[2].store.list_decisions(limit=100)
    consumed = [x for x in logged if x.decision.grant_consumed and x.decision.grant_id == grant.grant_id]
    assert [x.decision_id for x in consumed] == [decisions[0].decision_id]


@pytest.fixture
def killer(cluster: Cluster) -> Iterator[TcpProxy]:
    proxy = TcpProxy(("127.0.0.1", cluster.ports[0]), on_answer=lambda: cluster.kill(0))
    yield proxy
    proxy.close()


def test_a_replica_killed_right_after_its_commit_costs_the_action_nothing(cluster: Cluster, killer: TcpProxy) -> None:
    """Replica 0 commits the consumption and dies (-9) before its answer leaves; the
    client's failover sends the very same check to replica 1, which answers that allow."""
    exe = AuthzClient(cluster.addresses, cluster.tokens["exe"], timeout_s=5.0)
    op = AuthzClient(cluster.addresses, cluster.tokens["op"], timeout_s=5.0)
    through_proxy = f"127.0.0.1:{killer.port},127.0.0.1:{cluster.ports[1]},127.0.0.1:{cluster.ports[2]}"
    agent = AuthzClient(through_proxy, cluster.tokens["exe"], timeout_s=5.0)  # tries the proxy first
    try:
        epoch = exe.acquire("browser:f1", holder="agent-1", ttl_ms=60_000).epoch
        grant = op.grant("agent-1", "browser:f1", ["submit"], [], single_use=True)
        d = agent.check("agent-1", "browser:f1", epoch, "submit", **ACTION)
        assert killer.answers_dropped == 1 and cluster.procs[0] is None  # replica 0 answered, and died
        assert d.allow and d.replayed and d.grant_id == grant.grant_id, d
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            logged = {str(i) for (i,) in conn.execute("SELECT decision_id FROM decision_log")}
            used = conn.execute("SELECT used_at_ms FROM grants WHERE grant_id = %s", (grant.grant_id,)).fetchone()
        assert d.decision_id in logged and used is not None and used[0]  # replica 0's commit
        other = exe.check("agent-1", "browser:f1", epoch, "submit", **{**ACTION, "action_id": "a_2"})
        assert not other.allow and other.reason == "GRANT_EXHAUSTED"  # consumed once
    finally:
        for c in (exe, op, agent):
            c.close()
