"""A check sent again after its answer was lost gets the allow already made for it.

An allow that consumes a single-use grant, or uses an operator's approval, is committed
with that change (:meth:`AuthzStore.commit_check`). If its answer never reaches the
executor (the replica is killed right after the commit, the connection drops, the deadline
passes), the action never runs, and the same check sent again would find the grant used up
(``GRANT_EXHAUSTED``) or the approval used: the failover of :mod:`._balance`, which resends
a ``Check`` to another replica, would lose the action. So such an allow is kept under the
key of its request (:class:`Spent`, written in the same transaction), and a check of the
same request answers with it (:func:`replayed`) instead of deciding anew.

**The same request.** :func:`replay_key` is a digest of the caller (the authenticated
principal: another executor never gets this one's allow) and every field of the check:
the agent, the target, the lease epoch, the verb, the fingerprint, the ``action_id``, the
URL, the element, its context, the window, the approval asked for. Any field changed, and it
is another check, decided as any other: an ``action_id`` reused for another target, epoch,
fingerprint or verb gets no allow it did not earn. A check without an ``action_id`` is never
replayed: two such checks may be two actions, and one single-use grant allows one. The
executor promises that one id names one action of its own (it could as well dispatch one
allow twice: a replay gives it no power it did not have).

**Only what spent something.** A refusal, or an allow under a reusable grant, is decided
again as before: deciding it anew costs nothing and is at least as fresh. Only an allow
that consumed a grant or used an approval would be lost by deciding anew.

**Judged again.** A replay is no cached allow (invariant 7): the check is decided anew on
the store's current state with just what that allow spent given back (its grant not used
up, its approval ``APPROVED`` while its deadline holds), and the earlier allow is the answer
only when that decision is the same allow (same grant, same approval). A takeover or a
superseded epoch, a revoked, expired or closed grant, a revoked agent or a policy that now
forbids refuse it as they refuse any check; a replay is read on a fresh snapshot only.
Within :data:`REPLAY_WINDOW_MS` of the allow.

**What it writes.** Nothing is consumed or used again. The answer carries the earlier
allow's ``decision_id`` (the executor records that id with its intent: the allow its action
rests on) and ``replayed``. The log gets an entry of its own (a new id, ``grant_consumed``
false, its message naming the earlier decision): the log says what the sidecar answered and
when, and this answer was judged on the state of its own moment; counting the log's
consumptions still finds one per grant.

**Races.** Two identical checks at once (two replicas, or a resend while the first is still
deciding): both may decide to consume, but the conditional ``UPDATE`` lets one, and the key
is unique, so of two that would spend different grants for one request one commit fails
too; the loser decides again on a fresh read, finds the winner's allow and replays it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable

from handrail._vocabulary import Reason
from handrail.authz._decide import APPROVAL_USE, Verdict
from handrail.authz._explain import redact_check
from handrail.authz._models import (
    ApprovalInfo,
    ApprovalStatus,
    CheckInput,
    Decision,
    DecisionRecord,
    GrantInfo,
    Spent,
)
from handrail.authz._store import AuthzStore, CheckSnapshot

#: How long after an allow the same check sent again gets it (the store's clock).
REPLAY_WINDOW_MS = 10 * 60_000

#: Refusals that an allow of the same request could not have turned into: the lease and
#: the scope do not depend on a grant being used up.
_NOT_SPENT = frozenset(
    r.value for r in (Reason.NO_LEASE, Reason.HELD_BY_HUMAN, Reason.STALE_EPOCH, Reason.OUT_OF_SCOPE)
)

#: The version of :func:`replay_key`'s encoding (replicas of two versions agree on it).
_KEY_VERSION = 1


def replay_key(caller: str, request: CheckInput) -> str:
    """The digest that names ``request`` from ``caller``: equal only for equal requests."""
    c = request.context
    fields = (
        _KEY_VERSION,
        caller,
        request.principal,
        request.target,
        request.lease_epoch,
        str(request.verb),
        request.action_id,
        request.fingerprint,
        request.observation_id,
        request.url,
        request.element_role,
        request.element_name,
        request.window_class,
        request.window_title,
        request.password_field,
        request.document_load,
        request.approval_asked,
        (c.dialog_title, c.form_name, c.heading, c.description, c.visible_text),
    )
    return hashlib.sha256(json.dumps(fields, separators=(",", ":")).encode()).hexdigest()


def spent(caller: str, request: CheckInput, verdict: Verdict, decision: Decision, now_ms: int) -> Spent | None:
    """What to keep with ``decision`` for a resend of ``request``: None unless it is an
    allow that consumes a grant or uses an approval, of a check that names its action."""
    if not request.action_id or not decision.allow:
        return None
    grant = verdict.grant.grant_id if verdict.consume and verdict.grant is not None else ""
    approval = decision.approval_id if verdict.approval == APPROVAL_USE else ""
    if not (grant or approval):
        return None
    return Spent(replay_key(caller, request), decision.decision_id, grant, approval, now_ms)


def may_be_spent(request: CheckInput, verdict: Verdict) -> bool:
    """Whether ``verdict`` (decided afresh) may be what an earlier allow of the same
    request left behind: a check that names its action and would change state, or is
    refused for a reason a used-up grant or a used approval can give."""
    if not request.action_id:
        return False
    if verdict.decision.allow:
        return verdict.consume or bool(verdict.approval)
    return verdict.decision.reason not in _NOT_SPENT


def as_before(
    earlier: Spent, grants: list[GrantInfo], approval: Callable[[], ApprovalInfo | None], now_ms: int
) -> tuple[list[GrantInfo], Callable[[], ApprovalInfo | None]]:
    """``grants`` and the approval reader with what ``earlier`` spent given back: its grant
    not used up, its approval ``APPROVED`` (while its deadline holds, as a use requires).
    Nothing else: a revocation, an expiry, a closed task stand."""
    restored = [
        dataclasses.replace(g, used_at_ms=0) if g.grant_id == earlier.grant_id and g.single_use else g for g in grants
    ]

    def approval_before() -> ApprovalInfo | None:
        found = approval()
        if (
            found is not None
            and found.approval_id == earlier.approval_id
            and found.status == ApprovalStatus.USED
            and found.deadline_ms > now_ms
        ):
            approved = ApprovalStatus.APPROVED.value
            return dataclasses.replace(found, status=approved, used_at_ms=0, used_by_decision_id="")
        return found

    return restored, approval_before


def replayed(earlier: Spent, verdict: Verdict) -> Decision | None:
    """The answer to the resend: the earlier allow (its id, ``replayed``), when ``verdict``
    (decided on :func:`as_before`'s state) is that same allow; else None (decide as usual)."""
    decision = verdict.decision
    if not decision.allow:
        return None
    grant = verdict.grant.grant_id if verdict.consume and verdict.grant is not None else ""
    approval = decision.approval_id if verdict.approval == APPROVAL_USE else ""
    if (grant, approval) != (earlier.grant_id, earlier.approval_id):
        return None
    message = f"{decision.message}: the allow already given to this request (sent again), nothing spent again"
    return dataclasses.replace(decision, decision_id=earlier.decision_id, message=message, replayed=True)


def logged(answer: Decision, decision_id: str) -> Decision:
    """The decision log's entry of a replay: its own id, nothing consumed, the earlier
    allow named."""
    message = f"replay of decision {answer.decision_id} ({answer.message})"
    return dataclasses.replace(answer, decision_id=decision_id, grant_consumed=False, message=message)


def replay(
    store: AuthzStore,
    caller: str,
    request: CheckInput,
    snapshot: CheckSnapshot,
    judge: Callable[..., Verdict],
    approval: Callable[[], ApprovalInfo | None],
) -> Decision | None:
    """The answer to ``request`` sent again by ``caller``, when an allow of it spent
    something within :data:`REPLAY_WINDOW_MS` and deciding it again on ``snapshot`` (a fresh
    read) with that given back is the same allow; logged (:func:`logged`). None: decide as
    usual.

    Args:
        judge: ``judge(grants, approval=reader)`` decides the request on those grants and
            that approval reader (the clock, lease and policies of ``snapshot``).
        approval: reads the latest approval of the request's action.
    """
    earlier = store.spent_by(replay_key(caller, request), snapshot.now - REPLAY_WINDOW_MS)
    if earlier is None:
        return None
    grants, approval_before = as_before(earlier, snapshot.grants, approval, snapshot.now)
    verdict = judge(grants, approval=approval_before)
    answer = replayed(earlier, verdict)
    if answer is not None:
        entry = logged(answer, store.new_decision_id())
        request = redact_check(request)
        store.record_decision(
            DecisionRecord(entry.decision_id, snapshot.now, caller, request, entry, snapshot.lease, verdict.considered)
        )
    return answer
