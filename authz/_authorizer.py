"""The sidecar's behaviour without gRPC: who may call what, checks, leases, approvals, Watch.

:class:`Authorizer` owns the store, the policy engines (enforced and shadow) and the event
hub. The gRPC servicer authenticates, decodes and calls it; tests drive it directly. Each
state change is committed by the store first, then published to watchers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import heapq
import logging
import threading
import time
from pathlib import Path

from handrail._vocabulary import Reason
from handrail.authz import _core, _identity, _person_checks, _replay
from handrail.authz import _lease_changes as changes
from handrail.authz._decide import APPROVAL_CREATE, APPROVAL_USE, Verdict, decide, url_path
from handrail.authz._errors import (
    AuthzError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    PolicyError,
    StoreUnavailableError,
)
from handrail.authz._explain import approval_request, explain_text, redact_check
from handrail.authz._models import (
    DEFAULT_APPROVAL_TIMEOUT_MS,
    ApprovalInfo,
    ApprovalStatus,
    CheckInput,
    Decision,
    DecisionRecord,
    GrantInfo,
    GrantState,
    LeaseInfo,
    PolicyResult,
    Principal,
    PrincipalInfo,
    Role,
    WatchEventInfo,
)
from handrail.authz._policies import PolicyEngine
from handrail.authz._store import AuthzStore
from handrail.authz._watch_part import WatchPart

log = logging.getLogger("handrail.authz")

#: How often expiry of leases, grants and approvals is looked for, in seconds.
TICK_S = 0.02

_MAX_ATTEMPTS = 16

#: The most decisions or approvals one list call returns (a gRPC message stays small).
MAX_LISTED = 1000


class Authorizer(_person_checks.PersonChecks, WatchPart):
    """The sidecar's behaviour over one store.

    Args:
        store: the store (the truth): any :class:`AuthzStore`.
        policies: the enforced policy engine.
        shadow: a dry-run policy engine: evaluated on every check, logged, never enforced.
        policies_dir, shadow_dir: where :meth:`reload_policies` re-reads them from.
        approval_timeout_ms: the deadline of an approval when neither grant nor policy sets one.
    """

    def __init__(
        self,
        store: AuthzStore,
        policies: PolicyEngine,
        *,
        shadow: PolicyEngine | None = None,
        policies_dir: str | Path | None = None,
        shadow_dir: str | Path | None = None,
        approval_timeout_ms: int = DEFAULT_APPROVAL_TIMEOUT_MS,
    ) -> None:
        self.store = store
        self._engines = (policies, shadow)
        self._policies_dir = Path(policies_dir) if policies_dir else policies.directory
        self._shadow_dir = Path(shadow_dir) if shadow_dir else (shadow and shadow.directory)
        self.approval_timeout_ms = approval_timeout_ms
        self._reload_lock = threading.Lock()
        self._due: list[tuple[int, str, str]] = []  # (at_ms, kind, key) heap
        self._due_lock = threading.Lock()
        self.hub = store.event_hub()
        self.hub.on_remote = self._remote_event
        self._expired_leases: dict[str, tuple[int, int]] = {}  # target -> (epoch, expires)
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        for lease in store.leases():
            self._watch_expiry("lease", lease.target, lease.expires_at_ms)
        for at, grant_id in store.active_grant_expiries():
            self._watch_expiry("grant", grant_id, at)
        for at, approval_id in store.pending_deadlines():
            self._watch_expiry("approval", approval_id, at)

    @property
    def policies(self) -> PolicyEngine:
        """The enforced policy engine in force."""
        return self._engines[0]

    @property
    def shadow(self) -> PolicyEngine | None:
        """The shadow (dry-run) policy engine, if any."""
        return self._engines[1]

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start noticing expiries (a daemon thread)."""
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick_loop, name="authz-expiry", daemon=True)
            self._ticker.start()

    def close(self) -> None:
        """Stop the expiry thread and end every Watch."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(5)
        self.hub.close()

    # --- identity -----------------------------------------------------------------------------

    def authenticate(self, token: str) -> Principal:
        """The caller a bearer token names (see :func:`._identity.authenticate`)."""
        return _identity.authenticate(self.store, token)

    # --- principals ---------------------------------------------------------------------------

    def list_principals(self, caller: Principal) -> list[PrincipalInfo]:
        """Every principal, by name (operator, admin)."""
        _core.require_role(caller, _core.PRINCIPAL_READERS, "list principals")
        return self.store.principals()

    def revoke_principal(self, caller: Principal, name: str) -> PrincipalInfo:
        """Revoke a principal (admin); its token fails on the very next call."""
        _core.require_role(caller, _core.ADMINS, "revoke a principal")
        info = self.store.revoke_principal(name)
        log.info("principal %s revoked by %s", name, caller.name)
        return info

    def rotate_token(self, caller: Principal, name: str, expires_at_ms: int) -> tuple[PrincipalInfo, str]:
        """A new token for ``name`` (admin); the old one fails at once."""
        _core.require_role(caller, _core.ADMINS, "rotate a token")
        info, token = self.store.rotate_token(name, None, expires_at_ms)
        log.info("token of %s rotated by %s", name, caller.name)
        return info, token

    # --- checks -------------------------------------------------------------------------------

    def check(self, caller: Principal, request: CheckInput) -> Decision:
        """Decide one action and log the decision (see :mod:`._decide`)."""
        origin = _core.validate_check(request)
        _core.authorize_check(caller, request.principal)
        return self._check(caller, request, origin)

    def check_as(self, token: str, request: CheckInput) -> Decision:
        """:meth:`check` for the caller a bearer token names, read with the check's own
        snapshot (on PostgreSQL one round trip, not two). What the caller is told is what
        :meth:`authenticate` and :meth:`check` would tell: a request that is malformed and
        carries an unknown token too is UNAUTHENTICATED.

        Raises:
            UnauthenticatedError: as :meth:`authenticate`.
        """
        _identity.check_token(token)
        try:
            origin = _core.validate_check(request)
        except InvalidArgumentError:
            self.authenticate(token)
            raise
        return self._check(None, request, origin, token)

    def _check(self, caller: Principal | None, request: CheckInput, origin: str, token: str = "") -> Decision:
        """Decide ``request`` for ``caller``, or for the caller ``token`` names, read in
        each snapshot the decision is made on.

        The first snapshot may be one the store remembers (``recent``): a decision on it is
        logged only if it still holds (:meth:`AuthzStore.record_checked`), and anything
        else (a refusal of the caller or the agent, a state change) is decided again on a
        fresh read, as a lost race is."""
        engine, shadow = self._engines
        path = url_path(request.url)
        base = engine.base_context(request, origin, path, console=self.console_origins.contains(request.url))
        store = self.store

        def evaluate(grant: GrantInfo) -> PolicyResult:
            return engine.evaluate(request, origin, grant, base=base)

        def approval() -> ApprovalInfo | None:
            return store.latest_approval(request.principal, request.target, request.fingerprint, request.lease_epoch)

        recent = True
        for _ in range(_MAX_ATTEMPTS):
            decision_id = store.new_decision_id()
            snapshot = store.check_snapshot(request.principal, request.target, token, recent=recent)
            recent = False  # a lost race (or a remembered snapshot gone stale) decides again on a fresh read
            agent, lease, grants, now = snapshot.agent, snapshot.lease, snapshot.grants, snapshot.now
            remembered = snapshot.stamp is not None
            if token:  # the caller as this very snapshot has it: a revoked token acts on this check
                try:
                    caller = _identity.caller(snapshot.caller, now)
                    _core.authorize_check(caller, request.principal)
                except AuthzError:
                    if remembered:
                        continue
                    raise
            assert caller is not None
            problem = caller.name != request.principal and _identity.not_a_live_agent(agent, request.principal, now)
            if problem:  # read in the same snapshot: a revocation acts on this very check
                if remembered:
                    continue
                return self._deny(caller, request, Reason.UNAUTHENTICATED, problem)
            judge = functools.partial(
                decide, request, origin, lease, evaluate=evaluate, now_ms=now, decision_id=decision_id, path=path,
                default_approval_timeout_ms=self.approval_timeout_ms,
            )  # fmt: skip
            verdict = judge(grants, approval=approval)
            if _replay.may_be_spent(request, verdict):  # an allow of this very request may have spent it
                if remembered:
                    continue  # a replay is judged on a fresh read
                replayed = _replay.replay(store, caller.name, request, snapshot, judge, approval)
                if replayed is not None:
                    return replayed
            decision = verdict.decision
            if decision.decision_id != decision_id:  # denials are built without it
                decision = dataclasses.replace(decision, decision_id=decision_id)
            new_approval = None
            if verdict.approval == APPROVAL_CREATE:
                new_approval = approval_request(request, verdict, decision, now)
                decision = dataclasses.replace(decision, approval_id=new_approval.approval_id)
            if shadow is not None:
                would = shadow.evaluate(request, origin, verdict.grant, base=base)
                if would.forbidden:
                    decision = dataclasses.replace(decision, shadow_policies=would.policies)
            record = DecisionRecord(
                decision.decision_id,
                now,
                caller.name,
                redact_check(request),
                decision,
                lease,
                verdict.considered,
            )
            if verdict.consume or verdict.approval:
                if remembered:
                    continue  # a state change rests on a fresh read
                grant_id = verdict.grant.grant_id if verdict.grant is not None else ""
                used = decision.approval_id if verdict.approval == APPROVAL_USE else ""
                if not store.commit_check(
                    record,
                    consume=grant_id if verdict.consume else "",
                    use_approval=used,
                    new_approval=new_approval,
                    spent=_replay.spent(caller.name, request, verdict, decision, now),
                ):
                    continue  # another check won the race: decide again on fresh state
                self._after_commit(verdict, decision, new_approval)
            elif not store.record_checked(record, snapshot):
                continue  # what the remembered snapshot read has changed since
            if decision.shadow_policies:
                log.warning(
                    "authz shadow: would deny %s (%s %s on %s, enforced: %s): %s",
                    decision.decision_id,
                    request.principal,
                    request.verb,
                    request.target,
                    decision.reason,
                    ", ".join(decision.shadow_policies),
                )
            return decision
        raise AuthzError(f"check of {request.target!r} kept losing races; try again")

    def _after_commit(self, verdict: Verdict, decision: Decision, new_approval: ApprovalInfo | None) -> None:
        if verdict.consume and verdict.grant is not None:
            grant = self.store.indexed_grant(verdict.grant.grant_id)
            if grant is not None:
                self._publish_grant("consume", grant)
        if new_approval is not None:
            self._watch_expiry("approval", new_approval.approval_id, new_approval.deadline_ms)
            self._publish_approval("create", new_approval)
            log.info(
                "approval %s requested for %s %s on %s (deadline in %d ms)",
                new_approval.approval_id,
                new_approval.principal,
                new_approval.verb,
                new_approval.target,
                verdict.approval_timeout_ms,
            )
        elif verdict.approval == APPROVAL_USE:
            self._publish_approval("use", self.store.get_approval(decision.approval_id))

    def log_unauthenticated(self, request: CheckInput) -> None:
        """Log a check with an unknown token as an UNAUTHENTICATED decision, if it is valid."""
        try:
            _core.validate_check(request)
        except InvalidArgumentError:
            return
        decision = Decision(False, Reason.UNAUTHENTICATED.value, "unknown bearer token", self.store.new_decision_id())
        record = DecisionRecord(decision.decision_id, self.store.now_ms(), "", redact_check(request), decision)
        self.store.record_decision(record)

    def _deny(self, caller: Principal, request: CheckInput, reason: Reason, message: str) -> Decision:
        """Log and return a refusal decided before the lease and the grants are read."""
        lease = self.store.lease_row(request.target)
        decision = Decision(
            False, reason.value, message, self.store.new_decision_id(), lease_epoch=lease.epoch if lease else 0
        )
        record = DecisionRecord(
            decision.decision_id, self.store.now_ms(), caller.name, redact_check(request), decision, lease
        )
        self.store.record_decision(record)
        return decision

    # --- grants -------------------------------------------------------------------------------

    def grant(self, caller: Principal, grant: GrantInfo, ttl_ms: int = 0) -> GrantInfo:
        """Store a new grant (operator, admin); ``ttl_ms``: its lifetime from now by the
        store's clock, instead of ``grant.expires_at_ms``."""
        _core.authorize_manage(caller, "grant")
        _core.check_text("grant.principal", grant.principal, required=True)
        if ttl_ms:
            expires = _core.grant_expiry(ttl_ms, grant.expires_at_ms, self.store.now_ms())
            grant = dataclasses.replace(grant, expires_at_ms=expires)
        _identity.live_agent(self.store, grant.principal, "grant.principal")
        stored = self.store.add_grant(grant, caller.name)
        log.info("grant %s by %s: %s", stored.grant_id, caller.name, stored)
        if stored.expires_at_ms:
            self._watch_expiry("grant", stored.grant_id, stored.expires_at_ms)
        self._publish_grant("grant", stored)
        return stored

    def revoke(self, caller: Principal, grant_id: str) -> GrantInfo:
        """Revoke a grant (operator, admin); the very next check sees it."""
        _core.authorize_manage(caller, "revoke")
        grant = self.store.revoke_grant(grant_id)
        log.info("revoke %s by %s", grant.grant_id, caller.name)
        self._publish_grant("revoke", grant)
        return grant

    def close_task(self, caller: Principal, task_id: str) -> list[GrantInfo]:
        """End every grant bound to ``task_id`` (operator, admin)."""
        _core.authorize_manage(caller, "close a task")
        closed = self.store.close_task(task_id)
        log.info("task %s closed by %s: %d grants ended", task_id, caller.name, len(closed))
        for grant in closed:
            self._publish_grant("close", grant)
        return closed

    def list_grants(self, caller: Principal, principal: str, target: str, include_inactive: bool) -> list[GrantInfo]:
        """Grants, optionally filtered; an agent sees its own only."""
        if caller.role == Role.AGENT:
            if principal and principal != caller.name:
                raise PermissionDeniedError("role agent may only list its own grants")
            principal = caller.name
        return self.store.list_grants(principal, target, include_inactive)

    # --- leases -------------------------------------------------------------------------------

    def _change(self, target: str, transition: changes.LeaseChange) -> LeaseInfo:
        before, after = self.store.change_lease(target, transition)
        if after != before:
            self._watch_expiry("lease", target, after.expires_at_ms)
            if transition.name == "expire":
                self._expired_leases[target] = (after.epoch, self.store.now_ms())
            self._publish_lease(transition.name, after)
        return after

    def acquire(self, caller: Principal, target: str, holder: str, ttl_ms: int) -> LeaseInfo:
        """An agent takes a free, lapsed or handed-back lease, or renews its own."""
        holder = _core.resolve_holder(caller, holder, "acquire a lease")
        _core.check_text("target", target, required=True)
        now = self.store.now_ms()
        if not any(g.is_active(now) for g in self.store.grants_for(holder, target)):
            raise PermissionDeniedError(
                f"{holder!r} has no live grant on {target!r}: only a grant holder may take its lease",
                reason="NO_GRANT",
            )
        return self._change(target, changes.Acquire(holder, ttl_ms))

    def renew(self, caller: Principal, target: str, holder: str, epoch: int, ttl_ms: int) -> LeaseInfo:
        """The holder extends its lease at its epoch; the epoch stays."""
        holder = _core.resolve_holder(caller, holder, "renew a lease")
        return self._change(target, changes.Renew(holder, epoch, ttl_ms))

    def release(self, caller: Principal, target: str, holder: str, epoch: int) -> LeaseInfo:
        """The holder gives its lease up."""
        holder = _core.resolve_holder(caller, holder, "release a lease")
        return self._change(target, changes.Release(holder, epoch))

    def take_over(self, caller: Principal, target: str, ttl_ms: int, note: str) -> LeaseInfo:
        """A person takes control (operator, admin); always succeeds."""
        _core.authorize_manage(caller, "take over")
        _core.check_text("note", note)
        lease = self._change(target, changes.TakeOver(caller.name, ttl_ms))
        log.info("takeover of %s by %s (epoch %d): %s", target, caller.name, lease.epoch, note)
        return lease

    def hand_back(self, caller: Principal, target: str, epoch: int, next_holder: str) -> LeaseInfo:
        """A person frees the lease at ``epoch`` (operator, admin), maybe for one agent."""
        _core.authorize_manage(caller, "hand back")
        _core.check_text("next_holder", next_holder)
        if next_holder:
            _identity.live_agent(self.store, next_holder, "next_holder")
        lease = self._change(target, changes.HandBack(epoch, next_holder))
        log.info("hand-back of %s by %s (epoch %d)", target, caller.name, lease.epoch)
        return lease

    def report_activity(self, caller: Principal, target: str, note: str, ttl_ms: int) -> LeaseInfo:
        """A person is at the desk (executor): a takeover for ``desk:<target>``."""
        _core.require_role(caller, _core.DESK_REPORTERS, "report desk activity")
        _core.check_text("note", note)
        lease = self._change(target, changes.ReportActivity(ttl_ms=ttl_ms))
        log.info("desk activity on %s reported by %s (epoch %d): %s", target, caller.name, lease.epoch, note)
        return lease

    def expire_lease(self, caller: Principal, target: str) -> LeaseInfo:
        """The current lease lapses now (admin); the epoch moves only when someone acquires."""
        _core.require_role(caller, _core.ADMINS, "expire a lease")
        lease = self._change(target, changes.Expire())
        log.info("lease of %s expired by %s (epoch %d)", target, caller.name, lease.epoch)
        return lease

    def get_lease(self, caller: Principal, target: str) -> LeaseInfo:
        """The current lease of ``target`` (any role)."""
        return self.store.get_lease(target)

    # --- approvals ----------------------------------------------------------------------------

    def approve(self, caller: Principal, approval_id: str, note: str) -> ApprovalInfo:
        """Approve a pending approval (operator, admin)."""
        return self._decide_approval(caller, approval_id, note, ApprovalStatus.APPROVED)

    def deny(self, caller: Principal, approval_id: str, note: str) -> ApprovalInfo:
        """Deny a pending approval (operator, admin)."""
        return self._decide_approval(caller, approval_id, note, ApprovalStatus.DENIED)

    def _decide_approval(self, caller: Principal, approval_id: str, note: str, status: ApprovalStatus) -> ApprovalInfo:
        change = "approve" if status is ApprovalStatus.APPROVED else "deny"
        _core.authorize_manage(caller, change)
        before = self.store.get_approval(approval_id)
        approval = self.store.decide_approval(approval_id, status.value, caller.name, note)
        if before.status != approval.status:
            log.info("approval %s %s by %s: %s", approval_id, status.lower(), caller.name, note)
            self._publish_approval(change, approval)
        return approval

    def get_approval(self, caller: Principal, approval_id: str) -> ApprovalInfo:
        """One approval (executor, operator, admin, or the agent it is for)."""
        _core.check_text("approval_id", approval_id, required=True)
        approval = self.store.get_approval(approval_id)
        if caller.role not in _core.READERS and approval.principal != caller.name:
            # Another principal's approval reads as an unknown one: no existence oracle.
            raise NotFoundError(f"no approval with id {approval_id!r}", field="approval_id")
        return approval

    def list_approvals(
        self, caller: Principal, status: str, principal: str, target: str, limit: int
    ) -> list[ApprovalInfo]:
        """Approvals, newest first; an agent sees its own only."""
        if caller.role not in _core.READERS:
            if principal and principal != caller.name:
                raise PermissionDeniedError(f"role {caller.role} may only list its own approvals")
            principal = caller.name
        if not 0 <= limit <= MAX_LISTED:
            raise InvalidArgumentError("limit", f"must be within 0..{MAX_LISTED}")
        return self.store.list_approvals(status, principal, target, limit or 100)

    # --- policies -----------------------------------------------------------------------------

    def reload_policies(self, caller: Principal | None = None) -> tuple[PolicyEngine, ...]:
        """Re-read the policies (and shadow policies); a broken set changes nothing.

        Args:
            caller: the RPC caller (operator, admin); None for SIGHUP.

        Raises:
            PolicyError: ``FILE:LINE: message`` of the first problem; the old set stays.
        """
        if caller is not None:
            _core.authorize_manage(caller, "reload policies")
        engines = self._load_policies(caller.name if caller is not None else "SIGHUP")
        self.hub.publish(kind="policy", target="", change="reload", at_ms=self.store.now_ms())
        return engines

    def _load_policies(self, who: str) -> tuple[PolicyEngine, ...]:
        with self._reload_lock:
            try:
                engine = PolicyEngine.load(self._policies_dir)
                shadow = PolicyEngine.load(self._shadow_dir) if self._shadow_dir else None
            except PolicyError as exc:
                log.error("policy reload (%s) refused, the old policies stay: %s", who, exc)
                raise
            self._engines = (engine, shadow)
        shadows = len(shadow.policy_ids) if shadow else 0
        log.info("policies reloaded (%s): %d enforced, %d shadow", who, len(engine.policy_ids), shadows)
        return (engine, shadow) if shadow is not None else (engine,)

    # --- the decision log ---------------------------------------------------------------------

    def explain(self, caller: Principal, decision_id: str) -> tuple[DecisionRecord, str]:
        """A logged decision and a readable account of it (executor, operator, admin)."""
        _core.require_role(caller, _core.READERS, "read the decision log")
        record = self.store.get_decision(decision_id)
        grants = []
        for grant_id in record.grants_considered:
            try:
                grants.append(self.store.get_grant(grant_id))
            except AuthzError:
                continue
        return record, explain_text(record, grants, self.policies)

    def list_decisions(
        self,
        caller: Principal,
        principal: str = "",
        target: str = "",
        reason: str = "",
        since_ms: int = 0,
        limit: int = 50,
    ) -> list[DecisionRecord]:
        """Logged decisions, newest first (executor, operator, admin)."""
        _core.require_role(caller, _core.READERS, "read the decision log")
        if not 0 <= limit <= MAX_LISTED:
            raise InvalidArgumentError("limit", f"must be within 0..{MAX_LISTED}")
        return self.store.list_decisions(principal, target, reason, since_ms, limit or 50)

    # --- Watch (subscribing and publishing: WatchPart) -----------------------------------------

    def _remote_event(self, event: WatchEventInfo) -> None:
        """Another replica's change (a shared store): notice its expiry, reload policies."""
        if event.lease is not None:
            self._watch_expiry("lease", event.target, event.lease.expires_at_ms)
        if event.grant is not None and event.change == "grant":
            self._watch_expiry("grant", event.grant.grant_id, event.grant.expires_at_ms)
        if event.approval is not None and event.change == "create":
            self._watch_expiry("approval", event.approval.approval_id, event.approval.deadline_ms)
        if event.kind == "policy" and event.change == "reload":
            with contextlib.suppress(PolicyError):  # logged; this replica keeps its policies
                self._load_policies("another replica")

    # --- noticing expiry ----------------------------------------------------------------------

    def _watch_expiry(self, kind: str, key: str, at_ms: int) -> None:
        if at_ms > 0:
            with self._due_lock:
                heapq.heappush(self._due, (at_ms, kind, key))

    def _tick_loop(self) -> None:
        warned = 0.0
        while not self._stop.wait(TICK_S):
            try:
                self.tick()
            except StoreUnavailableError as exc:  # the database is away: say so every 10 s
                if time.monotonic() - warned > 10.0:
                    warned = time.monotonic()
                    log.warning("authz: noticing expiries waits for the store: %s", exc)
            except Exception:  # the thread must survive a bad tick (a process boundary)
                log.exception("authz: noticing expiries failed")

    def tick(self) -> None:
        """Publish what has expired by the store's clock since the last tick (not read while
        nothing waits or comes due before :meth:`AuthzStore.clock_bound_ms`)."""
        with self._due_lock:
            first = self._due[0][0] if self._due else None
        if first is None or ((bound := self.store.clock_bound_ms()) is not None and bound < first):
            return
        now = self.store.now_ms()
        due: list[tuple[int, str, str]] = []
        with self._due_lock:
            while self._due and self._due[0][0] <= now:
                due.append(heapq.heappop(self._due))
        approvals = False
        for _, kind, key in due:
            if kind == "lease":
                row = self.store.lease_row(key)
                if row is None or not row.holder_kind or row.expires_at_ms > now:
                    continue
                if self._expired_leases.get(key, (-1, 0))[0] == row.epoch:
                    continue  # already told (ExpireLease, or an earlier tick)
                self._expired_leases[key] = (row.epoch, now)
                self._publish_lease("expire", row.effective(now))
            elif kind == "grant":
                grant = self.store.indexed_grant(key)
                if grant is not None and grant.state(now) == GrantState.EXPIRED:
                    self._publish_grant("expire", grant)
            else:
                approvals = True
        if approvals:
            for approval in self.store.expire_approvals():
                log.info("approval %s expired (a timeout is a deny)", approval.approval_id)
                self._publish_approval("expire", approval)
