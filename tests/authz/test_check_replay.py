"""A check sent again after its answer was lost (authz/_replay.py), on both stores.

The same caller sending the same request again (same ``action_id``, every field equal) gets
the allow that request already had when that allow consumed a single-use grant or used an
approval: the same ``decision_id``, ``replayed``, nothing consumed again, judged again on
the current state. Anything else reusing an ``action_id`` gets no allow it did not earn.

Before authz/_replay.py, every resend below was refused ``GRANT_EXHAUSTED`` (or asked for a
new approval): the grant was used up by an allow nobody received.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from handrail.authz import AuthzClient, Decision
from handrail.authz._replay import REPLAY_WINDOW_MS
from tests.authz.conftest import Sidecar

TARGET = "browser:1"
OTHER = "browser:2"
ORIGIN = "http://127.0.0.1:8000"
URL = ORIGIN + "/pay"
ACTION: dict[str, Any] = {
    "url": URL,
    "action_id": "a_1",
    "fingerprint": "fp-1",
    "observation_id": "s1:3",
    "element_role": "button",
    "element_name": "Pay",
}


def _single_use(s: Sidecar, target: str = TARGET, **kw: Any) -> tuple[int, str]:
    """agent-a holds the lease of ``target``; one single-use grant for submit on ORIGIN."""
    epoch = s.client("exe").acquire(target, holder="agent-a", ttl_ms=3_600_000).epoch
    kw.setdefault("single_use", True)
    grant = s.client("op").grant("agent-a", kw.pop("grant_target", target), ["submit", "purchase"], [ORIGIN], **kw)
    return epoch, grant.grant_id


def _check(s: Sidecar, epoch: int, *, who: str = "exe", principal: str = "agent-a", **changed: Any) -> Decision:
    fields = {**ACTION, **changed}
    target = fields.pop("target", TARGET)
    verb = fields.pop("verb", "submit")
    return s.client(who).check(principal, target, epoch, verb, **fields)


def _consumed_in_log(s: Sidecar, grant_id: str) -> list[str]:
    logged = s.client("admin").list_decisions(limit=1000)
    return [r.decision_id for r in logged if r.decision.grant_consumed and r.decision.grant_id == grant_id]


def test_a_resent_check_gets_the_allow_it_already_had(sidecar: Sidecar) -> None:
    epoch, grant_id = _single_use(sidecar)
    first = _check(sidecar, epoch)
    assert first.allow and first.grant_consumed and not first.replayed
    again = _check(sidecar, epoch)  # the first answer was lost: the executor sends it again
    assert again.allow and again.replayed
    assert again.decision_id == first.decision_id and again.grant_id == grant_id and again.grant_consumed
    assert again.lease_epoch == epoch
    assert _check(sidecar, epoch).decision_id == first.decision_id  # as often as it is sent
    # Nothing consumed again: the grant's one use is the first allow's, and another action is refused.
    assert _consumed_in_log(sidecar, grant_id) == [first.decision_id]
    other = _check(sidecar, epoch, action_id="a_2")
    assert not other.allow and other.reason == "GRANT_EXHAUSTED"
    # The log is truthful: each replay is an entry of its own naming the allow it repeats.
    replays = [r for r in sidecar.client("admin").list_decisions(limit=100) if "replay of" in r.decision.message]
    assert len(replays) == 2
    assert all(r.decision.allow and not r.decision.grant_consumed for r in replays)
    assert all(first.decision_id in r.decision.message and r.request.action_id == "a_1" for r in replays)
    explained = sidecar.client("admin").explain_decision(replays[0].decision_id)
    assert first.decision_id in explained[0].decision.message


ATTACKS = [
    pytest.param({"fingerprint": "fp-other"}, "GRANT_EXHAUSTED", id="fingerprint"),
    pytest.param({"verb": "purchase"}, "GRANT_EXHAUSTED", id="verb"),
    pytest.param({"url": ORIGIN + "/pay?amount=1000"}, "GRANT_EXHAUSTED", id="url"),
    pytest.param({"element_name": "Pay again"}, "GRANT_EXHAUSTED", id="element"),
    pytest.param({"observation_id": "s1:4"}, "GRANT_EXHAUSTED", id="observation"),
    pytest.param({"approval_asked": "vendor safety check"}, "GRANT_EXHAUSTED", id="approval_asked"),
]


@pytest.mark.parametrize(("changed", "reason"), ATTACKS)
def test_an_action_id_reused_for_another_action_gets_no_second_allow(
    sidecar: Sidecar, changed: dict[str, Any], reason: str
) -> None:
    """One single-use grant, one allow: the same id on any other request is a new check."""
    epoch, grant_id = _single_use(sidecar)
    first = _check(sidecar, epoch)
    assert first.allow
    d = _check(sidecar, epoch, **changed)
    assert not d.allow and not d.replayed and d.reason == reason
    assert _consumed_in_log(sidecar, grant_id) == [first.decision_id]


def test_another_caller_reusing_the_action_id_gets_nothing(sidecar: Sidecar) -> None:
    """Another executor (or the agent itself) sending the very same request is another caller."""
    epoch, _ = _single_use(sidecar)
    sidecar.add("exe-2", "executor")
    assert _check(sidecar, epoch).allow
    for who in ("exe-2", "agent-a"):
        d = _check(sidecar, epoch, who=who)
        assert not d.allow and not d.replayed and d.reason == "GRANT_EXHAUSTED", who


def test_the_allow_is_not_carried_to_another_target_or_agent(sidecar: Sidecar) -> None:
    """A grant on a pattern covers both targets, each held at the same epoch by agent-a."""
    epoch, grant_id = _single_use(sidecar, grant_target="browser:*")
    assert sidecar.client("exe").acquire(OTHER, holder="agent-a", ttl_ms=3_600_000).epoch == epoch
    first = _check(sidecar, epoch)
    assert first.allow
    d = _check(sidecar, epoch, target=OTHER)
    assert not d.allow and not d.replayed and d.reason == "GRANT_EXHAUSTED"
    d = _check(sidecar, epoch, principal="agent-b")  # an agent that never had the grant
    assert not d.allow and not d.replayed and d.reason == "NO_LEASE"
    assert _consumed_in_log(sidecar, grant_id) == [first.decision_id]


def test_a_replay_is_refused_after_a_takeover_and_at_a_superseded_epoch(sidecar: Sidecar) -> None:
    epoch, _ = _single_use(sidecar)
    assert _check(sidecar, epoch).allow  # answer lost
    op = sidecar.client("op")
    taken = op.take_over(TARGET, ttl_ms=60_000)
    d = _check(sidecar, epoch)
    assert not d.allow and d.reason == "HELD_BY_HUMAN"
    op.hand_back(TARGET, taken.epoch, next_holder="agent-a")
    now = sidecar.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    assert now > epoch
    d = _check(sidecar, epoch)  # the old epoch: refused as any check at it
    assert not d.allow and d.reason == "STALE_EPOCH"
    d = _check(sidecar, now)  # the same action id at the new epoch is another request
    assert not d.allow and d.reason == "GRANT_EXHAUSTED"


def test_a_replay_is_refused_once_the_grant_is_revoked(sidecar: Sidecar) -> None:
    """Revocation acts on the very next check (invariant 7): no replay outlives it."""
    epoch, grant_id = _single_use(sidecar)
    assert _check(sidecar, epoch).allow
    sidecar.client("op").revoke(grant_id)
    d = _check(sidecar, epoch)
    assert not d.allow and not d.replayed and d.reason == "GRANT_REVOKED"


def test_a_replay_is_refused_once_the_grant_or_the_window_expired(sidecar: Sidecar) -> None:
    epoch, _ = _single_use(sidecar, ttl_ms=60_000)
    assert _check(sidecar, epoch).allow
    sidecar.clock.advance(61_000)
    d = _check(sidecar, epoch)  # refused as any check under the used-up grant is
    assert not d.allow and not d.replayed and d.reason == "GRANT_EXHAUSTED"
    epoch, _ = _single_use(sidecar, target=OTHER)
    first = _check(sidecar, epoch, target=OTHER, action_id="a_9")
    assert first.allow
    sidecar.clock.advance(REPLAY_WINDOW_MS - 1_000)
    assert _check(sidecar, epoch, target=OTHER, action_id="a_9").replayed
    sidecar.clock.advance(2_000)
    d = _check(sidecar, epoch, target=OTHER, action_id="a_9")
    assert not d.allow and d.reason == "GRANT_EXHAUSTED"


def test_a_replay_is_refused_once_the_agent_is_revoked(sidecar: Sidecar) -> None:
    epoch, _ = _single_use(sidecar)
    assert _check(sidecar, epoch).allow
    sidecar.client("admin").revoke_principal("agent-a")
    d = _check(sidecar, epoch)
    assert not d.allow and d.reason == "UNAUTHENTICATED"


def test_a_check_without_an_action_id_is_never_replayed(sidecar: Sidecar) -> None:
    """Two such checks may be two actions: one single-use grant allows one."""
    epoch, _ = _single_use(sidecar)
    assert _check(sidecar, epoch, action_id="").allow
    d = _check(sidecar, epoch, action_id="")
    assert not d.allow and d.reason == "GRANT_EXHAUSTED"


def test_an_allow_under_a_reusable_grant_is_decided_again(sidecar: Sidecar) -> None:
    epoch, _ = _single_use(sidecar, single_use=False)
    first, again = _check(sidecar, epoch), _check(sidecar, epoch)
    assert first.allow and again.allow and not again.replayed and again.decision_id != first.decision_id


def test_a_resent_check_gets_the_approval_it_used_not_a_new_one(sidecar: Sidecar) -> None:
    epoch = sidecar.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    op = sidecar.client("op")
    op.grant("agent-a", TARGET, ["submit"], [ORIGIN], require_approval_verbs=["submit"], single_use=True)
    asked = _check(sidecar, epoch)
    assert asked.reason == "APPROVAL_REQUIRED" and asked.approval_id
    op.approve(asked.approval_id)
    first = _check(sidecar, epoch)
    assert first.allow and first.approval_id == asked.approval_id and first.grant_consumed
    again = _check(sidecar, epoch)
    assert again.allow and again.replayed and again.decision_id == first.decision_id
    assert again.approval_id == asked.approval_id
    assert op.get_approval(asked.approval_id).used_by_decision_id == first.decision_id
    assert [a.approval_id for a in op.list_approvals()] == [asked.approval_id]  # no new one asked
    other = _check(sidecar, epoch, action_id="a_2")  # another action: the grant is spent
    assert not other.allow and other.reason == "GRANT_EXHAUSTED"


def test_concurrent_identical_checks_consume_once_and_all_get_that_allow(sidecar: Sidecar) -> None:
    """Twenty resends at once of one request (a balancer's failover racing the first):
    one consumption, one decision id, every answer that allow."""
    epoch, grant_id = _single_use(sidecar)
    clients = [AuthzClient(sidecar.address, sidecar.tokens["exe"]) for _ in range(20)]
    go = threading.Barrier(len(clients))

    def one(client: AuthzClient) -> Decision:
        go.wait()
        return client.check("agent-a", TARGET, epoch, "submit", **ACTION)

    try:
        with ThreadPoolExecutor(len(clients)) as pool:
            decisions = list(pool.map(one, clients))
    finally:
        for c in clients:
            c.close()
    assert all(d.allow for d in decisions), {d.reason for d in decisions}
    assert len({d.decision_id for d in decisions}) == 1
    assert sum(not d.replayed for d in decisions) == 1
    assert _consumed_in_log(sidecar, grant_id) == [decisions[0].decision_id]


def test_a_prune_of_the_decision_log_ends_the_replays_of_its_time(sidecar: Sidecar) -> None:
    epoch, _ = _single_use(sidecar)
    assert _check(sidecar, epoch).allow
    store = sidecar.server.store
    assert store.prune_decisions(sidecar.clock.now, dry_run=True) == 0 and _check(sidecar, epoch).replayed
    sidecar.clock.advance(1)
    store.prune_decisions(sidecar.clock.now)
    d = _check(sidecar, epoch)
    assert not d.allow and d.reason == "GRANT_EXHAUSTED"
