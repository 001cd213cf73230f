"""Races the store must serialize: single-use grants and approvals under concurrent checks."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from handrail.authz import AuthzClient, Decision
from tests.authz.conftest import Sidecar

TARGET = "browser:1"


def _storm(s: Sidecar, n: int, **kw: object) -> list[Decision]:
    epoch = s.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    clients = [AuthzClient(s.address, s.tokens["exe"]) for _ in range(n)]
    go = threading.Barrier(n)

    def one(client: AuthzClient) -> Decision:
        go.wait()
        return client.check("agent-a", TARGET, epoch, "submit", **kw)  # type: ignore[arg-type]

    try:
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(one, clients))
    finally:
        for c in clients:
            c.close()


def test_single_use_grant_allows_exactly_once_under_50_concurrent_checks(sidecar: Sidecar) -> None:
    grant = sidecar.client("op").grant("agent-a", TARGET, ["submit"], [], single_use=True)
    decisions = _storm(sidecar, 50)
    allows = [d for d in decisions if d.allow]
    assert len(allows) == 1 and allows[0].grant_consumed and allows[0].grant_id == grant.grant_id
    assert {d.reason for d in decisions if not d.allow} == {"GRANT_EXHAUSTED"}
    assert sidecar.server.store.count_decisions() == 50
    assert len({d.decision_id for d in decisions}) == 50


def test_concurrent_checks_of_one_action_share_one_approval(sidecar: Sidecar) -> None:
    sidecar.client("op").grant("agent-a", TARGET, ["submit"], [], require_approval_verbs=["submit"])
    decisions = _storm(sidecar, 20, fingerprint="same-action")
    assert {d.reason for d in decisions} == {"APPROVAL_REQUIRED"}
    assert len({d.approval_id for d in decisions}) == 1
    assert len(sidecar.client("op").list_approvals()) == 1


def test_approved_action_is_used_once_under_concurrency(sidecar: Sidecar) -> None:
    sidecar.client("op").grant("agent-a", TARGET, ["submit"], [], require_approval_verbs=["submit"])
    epoch = sidecar.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    first = sidecar.client("exe").check("agent-a", TARGET, epoch, "submit", fingerprint="f")
    sidecar.client("op").approve(first.approval_id)
    decisions = _storm(sidecar, 20, fingerprint="f")
    assert sum(d.allow for d in decisions) == 1
