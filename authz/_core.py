"""The pure core of the sidecar: plain types, request validation, roles and lease transitions.

Nothing here does I/O. The decision function lives in :mod:`._decide`; lease transitions
here take the current row and the store's clock and return the next row (or raise), and the
store writes them with a compare-and-set on the epoch.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from handrail.authz._errors import (
    InvalidArgumentError,
    LeaseConflictError,
    PermissionDeniedError,
)

#: Verbs as lowercase strings, from least to most consequential (the Cedar action ids).
VERBS: tuple[str, ...] = (
    "read",
    "input",
    "navigate",
    "submit",
    "purchase",
    "delete",
    "upload",
    "download",
)

#: Principal roles.
ROLES: tuple[str, ...] = ("agent", "operator", "executor", "admin")

#: Longest accepted string field, in characters.
MAX_FIELD_CHARS = 4096

#: Pattern fields of a grant, each a tuple of fnmatch patterns.
_PATTERN_FIELDS = (
    "path_globs",
    "role_patterns",
    "name_patterns",
    "window_class_patterns",
    "window_title_patterns",
)

DEFAULT_APPROVAL_TIMEOUT_MS = 5 * 60_000
MAX_APPROVAL_TIMEOUT_MS = 24 * 60 * 60_000

DEFAULT_AGENT_TTL_MS = 30_000
DEFAULT_HUMAN_TTL_MS = 10 * 60_000
MAX_TTL_MS = 60 * 60_000

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class Reason(enum.StrEnum):
    """Why a decision came out the way it did (mirrors the wire enum)."""

    ALLOW = "ALLOW"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    NO_LEASE = "NO_LEASE"
    STALE_EPOCH = "STALE_EPOCH"
    HELD_BY_HUMAN = "HELD_BY_HUMAN"
    OUT_OF_SCOPE = "OUT_OF_SCOPE"
    GRANT_EXPIRED = "GRANT_EXPIRED"
    GRANT_REVOKED = "GRANT_REVOKED"
    GRANT_EXHAUSTED = "GRANT_EXHAUSTED"
    POLICY_FORBID = "POLICY_FORBID"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    AUTHZ_UNAVAILABLE = "AUTHZ_UNAVAILABLE"
    APPROVAL_DENIED = "APPROVAL_DENIED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"


class ApprovalStatus(enum.StrEnum):
    """The life of an approval: PENDING → APPROVED → USED, or PENDING → DENIED | EXPIRED."""

    PENDING = "PENDING"
    APPROVED = "APPROVED"
    DENIED = "DENIED"
    EXPIRED = "EXPIRED"
    USED = "USED"


class HolderKind(enum.StrEnum):
    """Who holds a control lease; ``NONE`` means the lease is free."""

    NONE = ""
    AGENT = "agent"
    HUMAN = "human"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    name: str
    role: str


@dataclass(frozen=True)
class CheckInput:
    """One action to decide on, already decoded from the wire."""

    principal: str
    target: str
    lease_epoch: int
    verb: str
    url: str = ""
    element_role: str = ""
    element_name: str = ""
    window_class: str = ""
    window_title: str = ""
    password_field: bool = False
    action_id: str = ""
    fingerprint: str = ""
    observation_id: str = ""


@dataclass(frozen=True)
class Decision:
    """The answer to a check.

    Attributes:
        allow: whether the action may be dispatched.
        reason: a :class:`Reason` value (``"ALLOW"``, ``"NO_LEASE"`` ...).
        message: a readable explanation.
        decision_id: the id under which the decision is logged.
        policies: ``@id`` of the Cedar policies that decided (forbids).
        grant_id: the grant an allow rests on.
        lease_epoch: the target's current lease epoch (0 when there is no lease).
        approval_id: the pending approval (APPROVAL_REQUIRED), or the approval an allow used.
        shadow_policies: shadow (dry-run) policies that would have denied; never enforced.
        grant_consumed: the allow used up a single-use grant.
    """

    allow: bool
    reason: str
    message: str
    decision_id: str = ""
    policies: tuple[str, ...] = ()
    grant_id: str = ""
    lease_epoch: int = 0
    approval_id: str = ""
    shadow_policies: tuple[str, ...] = ()
    grant_consumed: bool = False


@dataclass(frozen=True)
class LeaseInfo:
    """The control lease of one target.

    Attributes:
        target: the controlled browser or desktop session.
        holder_kind: ``""`` (free), ``"agent"`` or ``"human"``.
        holder: the holding principal, empty when free.
        epoch: the fencing epoch; it grows by one on every change of holder.
        expires_at_ms: unix ms when the lease lapses (0 when free).
        next_holder: after a hand-back, the only agent that may acquire next.
    """

    target: str
    holder_kind: str = ""
    holder: str = ""
    epoch: int = 0
    expires_at_ms: int = 0
    next_holder: str = ""

    def is_live(self, now_ms: int) -> bool:
        """Whether someone holds the lease at ``now_ms``."""
        return self.holder_kind != HolderKind.NONE and self.expires_at_ms > now_ms

    def effective(self, now_ms: int) -> LeaseInfo:
        """This lease as seen at ``now_ms``: a lapsed lease shows as free (same epoch)."""
        if self.holder_kind == HolderKind.NONE or self.is_live(now_ms):
            return self
        return dataclasses.replace(self, holder_kind="", holder="", expires_at_ms=0)


@dataclass(frozen=True)
class GrantInfo:
    """A scope grant made by an operator.

    Attributes:
        grant_id: set by the server.
        principal: the agent the grant is for.
        target: the controlled session it applies to.
        verbs: lowercase verbs it allows (``"submit"`` ...).
        origins: ``scheme://host[:port]`` it is limited to; empty means any origin.
        expires_at_ms: unix ms; 0 means no expiry.
        granted_by: the operator who made it.
        note: why it was granted.
        created_at_ms: when it was made.
        revoked: whether it was revoked.
        path_globs: URL path globs (fnmatch, case-sensitive); empty means any path.
        role_patterns: element role patterns (case-insensitive); empty means any.
        name_patterns: element accessible-name patterns (case-insensitive); empty means any.
        window_class_patterns: desktop WM_CLASS patterns; empty means any.
        window_title_patterns: desktop window title patterns; empty means any.
        allow_password_input: may type into password fields (the shipped policy needs it).
        single_use: consumed by the first check it allows; later checks get GRANT_EXHAUSTED.
        task_id: the task it is bound to; ``CloseTask`` ends it.
        require_approval_verbs: verbs that need an operator's approval even when granted.
        approval_timeout_ms: deadline of the approvals it asks for (0: server default).
        revoked_at_ms, used_at_ms, closed_at_ms: set by the server (0 when not).
    """

    grant_id: str
    principal: str
    target: str
    verbs: tuple[str, ...]
    origins: tuple[str, ...] = ()
    expires_at_ms: int = 0
    granted_by: str = ""
    note: str = ""
    created_at_ms: int = 0
    revoked: bool = False
    path_globs: tuple[str, ...] = ()
    role_patterns: tuple[str, ...] = ()
    name_patterns: tuple[str, ...] = ()
    window_class_patterns: tuple[str, ...] = ()
    window_title_patterns: tuple[str, ...] = ()
    allow_password_input: bool = False
    single_use: bool = False
    task_id: str = ""
    require_approval_verbs: tuple[str, ...] = ()
    approval_timeout_ms: int = 0
    revoked_at_ms: int = 0
    used_at_ms: int = 0
    closed_at_ms: int = 0

    def state(self, now_ms: int) -> str:
        """``active``, ``revoked``, ``exhausted``, ``closed`` or ``expired`` at ``now_ms``."""
        if self.revoked:
            return "revoked"
        if self.used_at_ms:
            return "exhausted"
        if self.closed_at_ms:
            return "closed"
        if self.expires_at_ms and self.expires_at_ms <= now_ms:
            return "expired"
        return "active"

    def is_active(self, now_ms: int) -> bool:
        """Not revoked, used up, closed or expired at ``now_ms`` (:meth:`state` is ``active``)."""
        if self.revoked or self.used_at_ms or self.closed_at_ms:
            return False
        return not self.expires_at_ms or self.expires_at_ms > now_ms

    def state_at(self, at_ms: int) -> str:
        """The state the grant had at ``at_ms`` (for explaining past decisions)."""
        if at_ms < self.created_at_ms:
            return "not yet granted"
        if self.revoked_at_ms and self.revoked_at_ms <= at_ms:
            return "revoked"
        if self.used_at_ms and self.used_at_ms < at_ms:
            return "exhausted"
        if self.closed_at_ms and self.closed_at_ms <= at_ms:
            return "closed"
        if self.expires_at_ms and self.expires_at_ms <= at_ms:
            return "expired"
        return "active"

    @property
    def is_pattern(self) -> bool:
        """Whether ``target`` is an fnmatch pattern rather than one target."""
        return is_pattern(self.target)


@dataclass(frozen=True)
class ApprovalInfo:
    """An operator's approval of one exact action.

    Attributes:
        approval_id: set by the server.
        principal, target, fingerprint, lease_epoch: what it is bound to.
        status: an :class:`ApprovalStatus` value as stored (see :meth:`effective_status`).
        deadline_ms: unix ms; a pending approval past it is EXPIRED (a deny).
        decided_by, note, decided_at_ms: the operator's decision.
        verb, url, element_role, element_name, window_class, window_title: the action.
        observation_id, action_id: the executor's ids, for the record.
        grant_id: the grant the action rests on.
        policies: the Cedar policies that asked for approval (empty: the grant asked).
        created_at_ms, used_at_ms: set by the server.
        decision_id: the check that asked; used_by_decision_id: the check that used it.
    """

    approval_id: str
    principal: str
    target: str
    fingerprint: str
    status: str
    deadline_ms: int
    lease_epoch: int = 0
    verb: str = ""
    url: str = ""
    element_role: str = ""
    element_name: str = ""
    window_class: str = ""
    window_title: str = ""
    observation_id: str = ""
    action_id: str = ""
    grant_id: str = ""
    policies: tuple[str, ...] = ()
    decided_by: str = ""
    note: str = ""
    created_at_ms: int = 0
    decided_at_ms: int = 0
    used_at_ms: int = 0
    decision_id: str = ""
    used_by_decision_id: str = ""

    def effective_status(self, now_ms: int) -> str:
        """The status at ``now_ms``: a pending approval past its deadline is EXPIRED."""
        if self.status == ApprovalStatus.PENDING and now_ms >= self.deadline_ms:
            return ApprovalStatus.EXPIRED.value
        return self.status

    def effective(self, now_ms: int) -> ApprovalInfo:
        """This approval with :meth:`effective_status` as its status."""
        status = self.effective_status(now_ms)
        return self if status == self.status else dataclasses.replace(self, status=status)


@dataclass(frozen=True)
class PolicyResult:
    """What the Cedar policies said: whether a ``forbid`` fired, and which ones.

    Attributes:
        forbidden: a forbid fired (or failed to evaluate).
        policies: ``@id`` of the forbids that fired.
        message: a readable summary.
        approval_only: every forbid that fired is annotated ``@approval("required")``: the
            action may go ahead once an operator approves it.
        approval_timeout_ms: the shortest ``@approval_timeout_s`` among them (0: default).
    """

    forbidden: bool = False
    policies: tuple[str, ...] = ()
    message: str = ""
    approval_only: bool = False
    approval_timeout_ms: int = 0


@dataclass(frozen=True)
class DecisionRecord:
    """One logged decision: the request (secrets redacted), what the sidecar saw, the result.

    Attributes:
        decision_id: the id the caller got.
        at_ms: the store's clock when it was decided.
        caller: the authenticated caller (an executor, or the agent itself; ``""`` when the
            token was unknown).
        request: the check as asked (``principal`` is the agent the caller asserted).
        decision: the answer.
        lease: the target's lease row as the decision saw it (None: never leased).
        grants_considered: ids of the grants of (principal, target) that were looked at.
    """

    decision_id: str
    at_ms: int
    caller: str
    request: CheckInput
    decision: Decision
    lease: LeaseInfo | None = None
    grants_considered: tuple[str, ...] = ()


@dataclass(frozen=True)
class WatchEventInfo:
    """One change pushed by ``Watch``.

    Attributes:
        seq: grows by one per event of the server process.
        kind: ``"lease"``, ``"grant"``, ``"approval"`` or ``"policy"``.
        target: the target it concerns (empty for policy reloads).
        change: what happened (``"takeover"``, ``"revoke"``, ``"approve"`` ...).
        lease: the lease after the change (lease events).
        grant_id: the grant (grant events).
        approval_id, approval_status: the approval (approval events).
        at_ms: the store's clock.
        grant: the grant after the change (grant events).
        approval: the approval after the change (approval events).
    """

    seq: int
    kind: str
    target: str
    change: str = ""
    lease: LeaseInfo | None = None
    grant_id: str = ""
    approval_id: str = ""
    approval_status: str = ""
    at_ms: int = 0
    grant: GrantInfo | None = None
    approval: ApprovalInfo | None = None


# --- validation -------------------------------------------------------------------------------


def check_text(field: str, value: str, *, required: bool = False) -> str:
    """Return ``value`` if it is short enough (and non-empty when required)."""
    if required and not value:
        raise InvalidArgumentError(field, "must not be empty")
    if len(value) > MAX_FIELD_CHARS:
        raise InvalidArgumentError(field, f"longer than {MAX_FIELD_CHARS} characters")
    return value


def check_verb(field: str, verb: str) -> str:
    """Return ``verb`` if it is one of :data:`VERBS`."""
    if verb not in VERBS:
        raise InvalidArgumentError(field, f"unknown verb {verb!r} (known: {', '.join(VERBS)})")
    return verb


def check_role(field: str, role: str) -> str:
    """Return ``role`` if it is one of :data:`ROLES`."""
    if role not in ROLES:
        raise InvalidArgumentError(field, f"unknown role {role!r} (known: {', '.join(ROLES)})")
    return role


def check_ttl(field: str, ttl_ms: int, default_ms: int) -> int:
    """Return the effective TTL: ``default_ms`` for 0, else ``ttl_ms`` if within bounds."""
    if ttl_ms < 0:
        raise InvalidArgumentError(field, "must not be negative")
    if ttl_ms > MAX_TTL_MS:
        raise InvalidArgumentError(field, f"must be at most {MAX_TTL_MS} (one hour)")
    return ttl_ms or default_ms


def url_origin(field: str, url: str) -> str:
    """Return the origin ``scheme://host[:port]`` of ``url`` (default ports left out).

    An empty URL has the empty origin (desktop targets). Raises InvalidArgumentError for a URL
    without a scheme, an http(s)/ws(s) URL without a host, or a bad port.
    """
    if not url:
        return ""
    check_text(field, url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidArgumentError(field, f"malformed URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidArgumentError(field, f"malformed URL {url!r}: no scheme")
    host = (parts.hostname or "").lower()
    if scheme in _DEFAULT_PORTS and not host:
        raise InvalidArgumentError(field, f"malformed URL {url!r}: no host")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}:{port}"
    return f"{scheme}://{host}"


def normalize_origin(field: str, origin: str) -> str:
    """Validate a grant origin (``scheme://host[:port]``, nothing else) and normalize it."""
    check_text(field, origin, required=True)
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise InvalidArgumentError(field, f"malformed origin {origin!r}: {exc}") from None
    if not parts.scheme or not parts.hostname:
        raise InvalidArgumentError(field, f"origin {origin!r} must look like scheme://host[:port]")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise InvalidArgumentError(field, f"origin {origin!r} must be scheme://host[:port] without path or query")
    return url_origin(field, origin)


def validate_check(request: CheckInput) -> str:
    """Validate a check request; return the origin of its URL.

    Raises:
        InvalidArgumentError: naming the first offending field.
    """
    r = request
    longest = max(
        len(r.principal),
        len(r.target),
        len(r.element_role),
        len(r.element_name),
        len(r.window_class),
        len(r.window_title),
        len(r.action_id),
        len(r.fingerprint),
        len(r.observation_id),
        len(r.url),
    )
    if longest <= MAX_FIELD_CHARS and r.principal and r.target and r.lease_epoch >= 0 and r.verb in VERBS:
        return url_origin("resource.url", r.url)  # every field checked at once (the usual case)
    check_text("principal", request.principal, required=True)
    check_text("target", request.target, required=True)
    if request.lease_epoch < 0:
        raise InvalidArgumentError("lease_epoch", "must not be negative")
    check_verb("verb", request.verb)
    check_text("resource.element_role", request.element_role)
    check_text("resource.element_name", request.element_name)
    check_text("resource.window_class", request.window_class)
    check_text("resource.window_title", request.window_title)
    check_text("action_id", request.action_id)
    check_text("fingerprint", request.fingerprint)
    check_text("observation_id", request.observation_id)
    return url_origin("resource.url", request.url)


def validate_grant(grant: GrantInfo, now_ms: int) -> GrantInfo:
    """Validate a grant as requested; return it with verbs deduplicated and origins normalized.

    Raises:
        InvalidArgumentError: naming the first offending field (``grant.verbs`` ...).
    """
    check_text("grant.principal", grant.principal, required=True)
    check_text("grant.target", grant.target, required=True)
    if not grant.verbs:
        raise InvalidArgumentError("grant.verbs", "must name at least one verb")
    verbs = tuple(dict.fromkeys(check_verb(f"grant.verbs[{i}]", v) for i, v in enumerate(grant.verbs)))
    origins = tuple(dict.fromkeys(normalize_origin(f"grant.origins[{i}]", o) for i, o in enumerate(grant.origins)))
    if grant.expires_at_ms < 0:
        raise InvalidArgumentError("grant.expires_at_ms", "must not be negative")
    if 0 < grant.expires_at_ms <= now_ms:
        raise InvalidArgumentError("grant.expires_at_ms", "is in the past")
    check_text("grant.note", grant.note)
    patterns: dict[str, tuple[str, ...]] = {}
    for name in _PATTERN_FIELDS:
        values = getattr(grant, name)
        patterns[name] = tuple(
            dict.fromkeys(check_text(f"grant.{name}[{i}]", v, required=True) for i, v in enumerate(values))
        )
    for i, glob in enumerate(patterns["path_globs"]):
        if not glob.startswith(("/", "*")):
            raise InvalidArgumentError(f"grant.path_globs[{i}]", f"{glob!r} must start with / or *")
    check_text("grant.task_id", grant.task_id)
    approval_verbs = tuple(
        dict.fromkeys(
            check_verb(f"grant.require_approval_verbs[{i}]", v) for i, v in enumerate(grant.require_approval_verbs)
        )
    )
    if not 0 <= grant.approval_timeout_ms <= MAX_APPROVAL_TIMEOUT_MS:
        raise InvalidArgumentError(
            "grant.approval_timeout_ms", f"must be within 0..{MAX_APPROVAL_TIMEOUT_MS} (one day)"
        )
    return dataclasses.replace(
        grant,
        verbs=verbs,
        origins=origins,
        require_approval_verbs=approval_verbs,
        **patterns,  # type: ignore[arg-type]
    )


def is_pattern(target: str) -> bool:
    """Whether a grant target is an fnmatch pattern (``browser:*``) rather than one target."""
    return any(ch in target for ch in "*?[")


# --- who may do what --------------------------------------------------------------------------

_GRANTERS = frozenset({"operator", "admin"})
_CHECKERS = frozenset({"agent", "executor", "admin"})
_LEASE_USERS = frozenset({"agent", "executor", "operator", "admin"})
WATCHERS = frozenset({"executor", "operator", "admin"})
DESK_REPORTERS = frozenset({"executor", "admin"})
ADMINS = frozenset({"admin"})
MANAGERS = _GRANTERS
READERS = frozenset({"executor", "operator", "admin"})


def require_role(caller: Principal, allowed: frozenset[str] | Sequence[str], what: str) -> None:
    """Raise PermissionDeniedError unless ``caller.role`` is in ``allowed``."""
    if caller.role not in allowed:
        raise PermissionDeniedError(f"role {caller.role} may not {what}")


def authorize_check(caller: Principal, principal: str) -> None:
    """Executors and admins check for anyone, an agent only for itself."""
    require_role(caller, _CHECKERS, "call Check")
    if caller.role == "agent" and principal != caller.name:
        raise PermissionDeniedError(f"role agent may only check for itself ({caller.name!r}), not {principal!r}")


def authorize_manage(caller: Principal, what: str) -> None:
    """Grants, revocations, takeovers and hand-backs: operators and admins only."""
    require_role(caller, _GRANTERS, what)


def resolve_holder(caller: Principal, holder: str, what: str) -> str:
    """Return the agent a lease call acts for, enforcing who may act for whom.

    An agent acts for itself only (``holder`` empty or its own name); executors, operators and
    admins must name the agent.
    """
    require_role(caller, _LEASE_USERS, what)
    if caller.role == "agent":
        if holder and holder != caller.name:
            raise PermissionDeniedError(f"role agent may only {what} for itself ({caller.name!r}), not {holder!r}")
        return caller.name
    check_text("holder", holder, required=True)
    return holder


# --- lease transitions ------------------------------------------------------------------------
# Each takes the current row (epoch 0 and free when the target never had a lease) and returns
# the next one or raises LeaseConflictError; the store writes it with a compare-and-set on the
# epoch it read, inside one BEGIN IMMEDIATE transaction.


def _describe(lease: LeaseInfo) -> str:
    return f"{lease.holder_kind} {lease.holder!r} (epoch {lease.epoch})"


def lease_acquire(lease: LeaseInfo, holder: str, ttl_ms: int, now_ms: int) -> LeaseInfo:
    """An agent takes a free, lapsed or handed-back lease, or renews its own."""
    ttl = check_ttl("ttl_ms", ttl_ms, DEFAULT_AGENT_TTL_MS)
    if lease.is_live(now_ms):
        if lease.holder_kind == HolderKind.AGENT and lease.holder == holder:
            return dataclasses.replace(lease, expires_at_ms=now_ms + ttl)
        raise LeaseConflictError(f"the lease on {lease.target!r} is held by {_describe(lease)}")
    if lease.next_holder and lease.next_holder != holder:
        raise LeaseConflictError(
            f"the lease on {lease.target!r} was handed back to {lease.next_holder!r}; {holder!r} may not acquire it"
        )
    return LeaseInfo(lease.target, HolderKind.AGENT.value, holder, lease.epoch + 1, now_ms + ttl)


def _require_holder(lease: LeaseInfo, holder: str, epoch: int, what: str) -> None:
    if lease.holder_kind != HolderKind.AGENT or lease.holder != holder:
        held = _describe(lease) if lease.holder_kind else "nobody"
        raise LeaseConflictError(f"cannot {what} the lease on {lease.target!r}: it is held by {held}, not {holder!r}")
    if epoch != lease.epoch:
        raise LeaseConflictError(
            f"cannot {what} the lease on {lease.target!r}: epoch {epoch} is stale (current {lease.epoch})"
        )


def lease_renew(lease: LeaseInfo, holder: str, epoch: int, ttl_ms: int, now_ms: int) -> LeaseInfo:
    """The holding agent extends its live lease; the epoch stays."""
    ttl = check_ttl("ttl_ms", ttl_ms, DEFAULT_AGENT_TTL_MS)
    _require_holder(lease.effective(now_ms), holder, epoch, "renew")
    return dataclasses.replace(lease, expires_at_ms=now_ms + ttl)


def lease_release(lease: LeaseInfo, holder: str, epoch: int, now_ms: int) -> LeaseInfo:
    """The holding agent gives its lease up; freeing it bumps the epoch."""
    _require_holder(lease, holder, epoch, "release")
    return LeaseInfo(lease.target, "", "", lease.epoch + 1, 0, "")


def lease_take_over(lease: LeaseInfo, operator: str, ttl_ms: int, now_ms: int) -> LeaseInfo:
    """A person takes control: always succeeds, and bumps the epoch unless that very person
    already holds the live lease (then only the expiry moves: the holder did not change)."""
    ttl = check_ttl("ttl_ms", ttl_ms, DEFAULT_HUMAN_TTL_MS)
    if lease.is_live(now_ms) and lease.holder_kind == HolderKind.HUMAN and lease.holder == operator:
        return dataclasses.replace(lease, expires_at_ms=now_ms + ttl, next_holder="")
    return LeaseInfo(lease.target, HolderKind.HUMAN.value, operator, lease.epoch + 1, now_ms + ttl)


def desk_holder(target: str) -> str:
    """The human holder named for a person seen at the desk of ``target``."""
    return f"desk:{target}"


def lease_report_activity(lease: LeaseInfo, ttl_ms: int, now_ms: int) -> LeaseInfo:
    """A person is at the desk: a takeover for the human holder ``desk:<target>``."""
    return lease_take_over(lease, desk_holder(lease.target), ttl_ms, now_ms)


def lease_expire(lease: LeaseInfo, now_ms: int) -> LeaseInfo:
    """Make a live lease lapse now (the epoch stays until someone acquires)."""
    if not lease.is_live(now_ms):
        return lease
    return dataclasses.replace(lease, expires_at_ms=now_ms)


def lease_hand_back(lease: LeaseInfo, epoch: int, next_holder: str, now_ms: int) -> LeaseInfo:
    """An operator frees the lease, optionally reserving it for one agent; bumps the epoch."""
    check_text("next_holder", next_holder)
    if epoch != lease.epoch:
        raise LeaseConflictError(
            f"cannot hand back the lease on {lease.target!r}: epoch {epoch} is stale (current {lease.epoch})"
        )
    return LeaseInfo(lease.target, "", "", lease.epoch + 1, 0, next_holder)
