"""The decision function: lease first, then grants as scopes, then Cedar, then approvals.

Pure: :func:`decide` is a function of (request, lease, grants, a policy evaluator, the clock
and a lazily read approval) to a :class:`Verdict`. It does no I/O; the authorizer supplies
its inputs from the store and writes what the verdict asks for (consume a single-use grant,
create or use an approval, log the decision) in one transaction.

The order of judgement, each refusal with its own reason:

1. the lease: ``NO_LEASE``, ``HELD_BY_HUMAN``, ``STALE_EPOCH`` (no live lease and every
   grant of the principal on the target ended: that grant's reason, since only a grant
   holder may take the lease);
2. the grants of (principal, target) whose scope covers the action (verb, origin, path,
   element role and name, window class and title): none ⇒ ``OUT_OF_SCOPE``; none active ⇒
   ``GRANT_REVOKED``, ``GRANT_EXHAUSTED`` or ``GRANT_EXPIRED`` — except that a check a
   used-up single-use grant covers is asked of Cedar under it first: a hard ``forbid`` ⇒
   ``POLICY_FORBID``, and ``@approval`` forbids that fire are named in the
   ``GRANT_EXHAUSTED`` answer (``policies``). The executor takes a bare ``GRANT_EXHAUSTED``
   under the grant its action just spent as "within that grant's scope" for the action's
   effects (another path of its page's origin): a policy must still be able to refuse one;
3. Cedar, once per active grant (reusable grants before single-use ones, oldest first),
   with the grant's facts in the context; the first grant no ``forbid`` stops allows.
   A hard ``forbid`` ⇒ ``POLICY_FORBID``; forbids annotated ``@approval("required")``, or
   a verb in the grant's ``require_approval_verbs``, ⇒ an approval is needed;
4. the approval bound to (principal, target, fingerprint, epoch): approved ⇒ allow (and it
   is used up); pending ⇒ ``APPROVAL_REQUIRED`` with its id; denied ⇒ ``APPROVAL_DENIED``;
   timed out ⇒ ``APPROVAL_EXPIRED``; none or used ⇒ ``APPROVAL_REQUIRED`` with a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from handrail._patterns import glob_matcher
from handrail._vocabulary import Reason
from handrail.authz import _urls
from handrail.authz._models import (
    DEFAULT_APPROVAL_TIMEOUT_MS,
    ApprovalInfo,
    ApprovalStatus,
    CheckInput,
    Decision,
    GrantInfo,
    GrantState,
    HolderKind,
    LeaseInfo,
    PolicyResult,
    quick_init,
)

#: What a verdict asks the store to do about approvals.
APPROVAL_CREATE = "create"
APPROVAL_USE = "use"


@quick_init
@dataclass(frozen=True)
class Verdict:
    """A decision and what must be written with it.

    Attributes:
        decision: the answer (``decision_id`` and, for a new approval, ``approval_id`` are
            filled in by the authorizer).
        grant: the grant the outcome rests on, if any.
        consume: the allow uses up ``grant`` (single use).
        approval: ``""``, :data:`APPROVAL_CREATE` or :data:`APPROVAL_USE`.
        approval_policies: the policies that asked for approval.
        approval_timeout_ms: the deadline of a new approval, from now.
        considered: ids of every grant of (principal, target) that was looked at.
    """

    decision: Decision
    grant: GrantInfo | None = None
    consume: bool = False
    approval: str = ""
    approval_policies: tuple[str, ...] = ()
    approval_timeout_ms: int = 0
    considered: tuple[str, ...] = ()


def url_path(url: str) -> str:
    """The path of ``url`` as a browser parses it (``""`` for no URL)."""
    return _urls.url_path(url)


def _any(value: str, patterns: tuple[str, ...], *, fold: bool = True) -> bool:
    # Globs run in RE2 (linear time), compiled once per pattern: a grant's pattern cannot
    # stall the sidecar however it is written (see handrail._patterns).
    return any(glob_matcher(p, ignore_case=fold)(value) for p in patterns)


def target_matches(grant_target: str, target: str) -> bool:
    """Whether a grant's target (one target or an fnmatch pattern) covers ``target``."""
    return grant_target == target or glob_matcher(grant_target)(target)


def grant_mismatch(grant: GrantInfo, request: CheckInput, origin: str, path: str) -> str | None:
    """Why ``grant``'s scope does not cover ``request``, or None when it does.

    Lifetime (revoked, expired ...) is not judged here; see :meth:`GrantInfo.state`.
    """
    if grant.principal != request.principal:
        return f"it is for {grant.principal!r}, not {request.principal!r}"
    if not target_matches(grant.target, request.target):
        return f"its target {grant.target!r} does not cover {request.target!r}"
    if request.verb not in grant.verbs:
        return f"it does not grant {request.verb} (only {', '.join(grant.verbs)})"
    if grant.origins and origin not in grant.origins:
        return f"origin {origin or '(none)'!r} is not one of {', '.join(grant.origins)}"
    if grant.path_globs and not _any(path, grant.path_globs, fold=False):
        return f"path {path or '(none)'!r} matches none of {', '.join(grant.path_globs)}"
    if not (grant.role_patterns or grant.name_patterns or grant.window_class_patterns or grant.window_title_patterns):
        return None
    checks = (
        ("element role", request.element_role, grant.role_patterns),
        ("element name", request.element_name, grant.name_patterns),
        ("window class", request.window_class, grant.window_class_patterns),
        ("window title", request.window_title, grant.window_title_patterns),
    )
    for what, value, patterns in checks:
        if patterns and not _any(value, patterns):
            return f"{what} {value!r} matches none of {', '.join(patterns)}"
    return None


def _deny(reason: Reason, message: str, lease: LeaseInfo | None, **kw: object) -> Decision:
    epoch = lease.epoch if lease is not None else 0
    return Decision(False, reason.value, message, lease_epoch=epoch, **kw)  # type: ignore[arg-type]


def judge_lease(request: CheckInput, lease: LeaseInfo | None, now_ms: int) -> Decision | None:
    """The lease's refusal of ``request``, or None when the principal holds it at its epoch."""
    if lease is None or not lease.is_live(now_ms):
        return _deny(Reason.NO_LEASE, f"no live control lease on {request.target!r}", lease)
    if lease.holder_kind == HolderKind.HUMAN:
        return _deny(
            Reason.HELD_BY_HUMAN,
            f"{request.target!r} is under human control by {lease.holder!r}",
            lease,
        )
    if lease.holder != request.principal:
        return _deny(
            Reason.NO_LEASE,
            f"the lease on {request.target!r} is held by another agent, not {request.principal!r}",
            lease,
        )
    if request.lease_epoch != lease.epoch:
        return _deny(
            Reason.STALE_EPOCH,
            f"lease epoch {request.lease_epoch} is stale; the current epoch is {lease.epoch}",
            lease,
        )
    return None


_ALLOW = Reason.ALLOW.value

_INACTIVE = (
    (GrantState.REVOKED, Reason.GRANT_REVOKED, "was revoked"),
    (GrantState.EXHAUSTED, Reason.GRANT_EXHAUSTED, "was single-use and is used up"),
    (GrantState.CLOSED, Reason.GRANT_EXPIRED, "ended when its task was closed"),
    (GrantState.EXPIRED, Reason.GRANT_EXPIRED, "has expired"),
)


def decide(
    request: CheckInput,
    origin: str,
    lease: LeaseInfo | None,
    grants: Iterable[GrantInfo],
    evaluate: Callable[[GrantInfo], PolicyResult],
    now_ms: int,
    *,
    approval: Callable[[], ApprovalInfo | None] = lambda: None,
    default_approval_timeout_ms: int = DEFAULT_APPROVAL_TIMEOUT_MS,
    decision_id: str = "",
    path: str | None = None,
) -> Verdict:
    """Decide one action (see the module docstring for the order).

    Args:
        request: the validated check.
        origin: the origin of ``request.url``.
        lease: the target's lease row, or None when it never had one.
        grants: the grants of ``request.principal`` whose target may cover ``request.target``.
        evaluate: Cedar's verdict on the action under one grant (its facts are in the context).
        now_ms: the store's clock.
        approval: reads the latest approval bound to (principal, target, fingerprint,
            epoch); called only when an approval is needed.
        default_approval_timeout_ms: the deadline of a new approval when neither the grant
            nor the policy sets one.
        decision_id: the id to stamp on the decision.
        path: ``url_path(request.url)``, when the caller has it already.
    """
    grants = grants if isinstance(grants, list) else list(grants)
    considered = tuple([g.grant_id for g in grants])
    refusal = judge_lease(request, lease, now_ms)
    if refusal is not None:
        if (lease is None or not lease.is_live(now_ms)) and grants and not any(g.is_active(now_ms) for g in grants):
            # Only a grant holder may take a lease: with every grant ended, the grant is why.
            states = {g.state(now_ms): g for g in grants}
            for state, reason, text in _INACTIVE:
                if state in states:
                    grant = states[state]
                    message = f"no live control lease on {request.target!r}: the grant {text}"
                    decision = _deny(reason, message, lease, grant_id=grant.grant_id)
                    return Verdict(decision, grant, considered=considered)
        return Verdict(refusal, considered=considered)
    assert lease is not None
    epoch = lease.epoch

    if path is None:
        path = url_path(request.url)
    scoped = [g for g in grants if grant_mismatch(g, request, origin, path) is None]
    active = [g for g in scoped if g.is_active(now_ms)]
    if not active:
        what = f"{request.verb} on {origin or request.target}"
        if not scoped:
            message = f"no grant allows {what} for {request.principal!r}"
            return Verdict(_deny(Reason.OUT_OF_SCOPE, message, lease), considered=considered)
        states = {g.state(now_ms): g for g in scoped}
        for state, reason, text in _INACTIVE:
            if state in states:
                grant = states[state]
                asked: tuple[str, ...] = ()
                if state is GrantState.EXHAUSTED:
                    policy = evaluate(grant)
                    if policy.forbidden and not policy.approval_only:
                        return Verdict(_forbid(policy, lease, grant), grant, considered=considered)
                    asked = policy.policies  # @approval forbids that fired: named, never covered
                message = f"the grant for {what} {text}"
                decision = _deny(reason, message, lease, grant_id=grant.grant_id, policies=asked)
                return Verdict(decision, grant, considered=considered)
    if len(active) > 1:  # reusable grants first: a single-use grant is spent only when nothing else allows
        active.sort(key=lambda g: g.single_use)

    forbid: tuple[GrantInfo, PolicyResult] | None = None
    needs: tuple[GrantInfo, PolicyResult] | None = None
    for grant in active:
        policy = evaluate(grant)
        if policy.forbidden and not policy.approval_only:
            forbid = forbid or (grant, policy)
            continue
        if policy.forbidden or request.verb in grant.require_approval_verbs or request.approval_asked:
            needs = needs or (grant, policy)
            continue
        decision = Decision(
            True,
            _ALLOW,
            f"allowed by grant {grant.grant_id}",
            decision_id=decision_id,
            grant_id=grant.grant_id,
            lease_epoch=epoch,
            grant_consumed=grant.single_use,
            idempotency_header=grant.idempotency_header,
        )
        return Verdict(decision, grant, consume=grant.single_use, considered=considered)

    if needs is not None:
        return _approval_verdict(request, epoch, needs, now_ms, approval, default_approval_timeout_ms, considered)
    assert forbid is not None
    grant, policy = forbid
    return Verdict(_forbid(policy, lease, grant), grant, considered=considered)


def _forbid(policy: PolicyResult, lease: LeaseInfo | None, grant: GrantInfo) -> Decision:
    names = ", ".join(policy.policies) or "(unnamed)"
    message = policy.message or f"forbidden by policy {names}"
    return _deny(Reason.POLICY_FORBID, message, lease, policies=policy.policies, grant_id=grant.grant_id)


def _approval_verdict(
    request: CheckInput,
    epoch: int,
    needs: tuple[GrantInfo, PolicyResult],
    now_ms: int,
    approval: Callable[[], ApprovalInfo | None],
    default_timeout_ms: int,
    considered: tuple[str, ...],
) -> Verdict:
    grant, policy = needs
    policies = policy.policies if policy.forbidden else ()
    asked_by = f"policy {', '.join(policies)}" if policies else f"grant {grant.grant_id}"
    if not policies and request.verb not in grant.require_approval_verbs and request.approval_asked:
        asked_by = f"asked for: {request.approval_asked}"
    common = {"grant_id": grant.grant_id, "lease_epoch": epoch, "policies": policies}
    if not request.fingerprint:
        decision = Decision(
            False,
            Reason.APPROVAL_REQUIRED.value,
            f"{request.verb} needs an operator's approval ({asked_by}), and an approval is "
            "bound to the action's fingerprint, which the request did not carry",
            **common,  # type: ignore[arg-type]
        )
        return Verdict(decision, grant, considered=considered)
    existing = approval()
    status = existing.effective_status(now_ms) if existing is not None else ""
    if existing is not None and status == ApprovalStatus.APPROVED:
        decision = Decision(
            True,
            Reason.ALLOW.value,
            f"allowed by grant {grant.grant_id} with approval {existing.approval_id} by {existing.decided_by}",
            approval_id=existing.approval_id,
            grant_consumed=grant.single_use,
            idempotency_header=grant.idempotency_header,
            **common,  # type: ignore[arg-type]
        )
        return Verdict(decision, grant, consume=grant.single_use, approval=APPROVAL_USE, considered=considered)
    if existing is not None and status in _FINAL_REFUSALS:
        reason, text = _FINAL_REFUSALS[status]
        decision = Decision(
            False,
            reason.value,
            f"approval {existing.approval_id} of this exact action {text}; observe again to ask anew",
            approval_id=existing.approval_id,
            **common,  # type: ignore[arg-type]
        )
        return Verdict(decision, grant, considered=considered)
    if existing is not None and status == ApprovalStatus.PENDING:
        decision = Decision(
            False,
            Reason.APPROVAL_REQUIRED.value,
            f"waiting for an operator to approve {existing.approval_id} ({asked_by})",
            approval_id=existing.approval_id,
            **common,  # type: ignore[arg-type]
        )
        return Verdict(decision, grant, considered=considered)
    timeouts = [t for t in (grant.approval_timeout_ms, policy.approval_timeout_ms) if t > 0]
    decision = Decision(
        False,
        Reason.APPROVAL_REQUIRED.value,
        f"{request.verb} needs an operator's approval ({asked_by})",
        **common,  # type: ignore[arg-type]
    )
    return Verdict(
        decision,
        grant,
        approval=APPROVAL_CREATE,
        approval_policies=policies,
        approval_timeout_ms=min(timeouts) if timeouts else default_timeout_ms,
        considered=considered,
    )


_FINAL_REFUSALS = {
    ApprovalStatus.DENIED.value: (Reason.APPROVAL_DENIED, "was denied"),
    ApprovalStatus.EXPIRED.value: (Reason.APPROVAL_EXPIRED, "timed out, which is a deny"),
}
