"""The pure core of the sidecar: plain types, request validation and the decision function.

Nothing here does I/O. :func:`decide` is a function of (request, lease, grants, policy result,
clock reading) to a :class:`Decision`; the store supplies its inputs and records its output,
and the gRPC servicer only translates.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Sequence
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
    """

    allow: bool
    reason: str
    message: str
    decision_id: str = ""
    policies: tuple[str, ...] = ()
    grant_id: str = ""
    lease_epoch: int = 0


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

    def is_active(self, now_ms: int) -> bool:
        """Not revoked and not expired at ``now_ms``."""
        return not self.revoked and (self.expires_at_ms == 0 or self.expires_at_ms > now_ms)


@dataclass(frozen=True)
class PolicyResult:
    """What the Cedar policies said: whether a ``forbid`` fired, and which ones."""

    forbidden: bool = False
    policies: tuple[str, ...] = ()
    message: str = ""


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
        raise InvalidArgumentError(
            field, f"origin {origin!r} must be scheme://host[:port] without path or query"
        )
    return url_origin(field, origin)


def validate_check(request: CheckInput) -> str:
    """Validate a check request; return the origin of its URL.

    Raises:
        InvalidArgumentError: naming the first offending field.
    """
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
    verbs = tuple(
        dict.fromkeys(check_verb(f"grant.verbs[{i}]", v) for i, v in enumerate(grant.verbs))
    )
    origins = tuple(
        dict.fromkeys(
            normalize_origin(f"grant.origins[{i}]", o) for i, o in enumerate(grant.origins)
        )
    )
    if grant.expires_at_ms < 0:
        raise InvalidArgumentError("grant.expires_at_ms", "must not be negative")
    if 0 < grant.expires_at_ms <= now_ms:
        raise InvalidArgumentError("grant.expires_at_ms", "is in the past")
    check_text("grant.note", grant.note)
    return dataclasses.replace(grant, verbs=verbs, origins=origins)


# --- the decision -----------------------------------------------------------------------------


def _deny(reason: Reason, message: str, lease: LeaseInfo | None, **kw: object) -> Decision:
    epoch = lease.epoch if lease is not None else 0
    return Decision(False, reason.value, message, lease_epoch=epoch, **kw)  # type: ignore[arg-type]


def decide(
    request: CheckInput,
    origin: str,
    lease: LeaseInfo | None,
    grants: Iterable[GrantInfo],
    policy: PolicyResult,
    now_ms: int,
    *,
    decision_id: str = "",
) -> Decision:
    """Decide one action: lease first, then grants, then Cedar forbids.

    Args:
        request: the validated check.
        origin: the origin of ``request.url`` (see :func:`validate_check`).
        lease: the target's lease row, or None when it never had one.
        grants: every grant of (principal, target), active or not.
        policy: the Cedar evaluation of this action.
        now_ms: the store's clock.
        decision_id: the id to stamp on the decision.

    Returns:
        The decision; ``lease_epoch`` is the target's current epoch.
    """
    kw: dict[str, object] = {"decision_id": decision_id}
    if lease is None or not lease.is_live(now_ms):
        return _deny(Reason.NO_LEASE, f"no live control lease on {request.target!r}", lease, **kw)
    if lease.holder_kind == HolderKind.HUMAN:
        return _deny(
            Reason.HELD_BY_HUMAN,
            f"{request.target!r} is under human control by {lease.holder!r}",
            lease,
            **kw,
        )
    if lease.holder != request.principal:
        return _deny(
            Reason.NO_LEASE,
            f"the lease on {request.target!r} is held by another agent, not {request.principal!r}",
            lease,
            **kw,
        )
    if request.lease_epoch != lease.epoch:
        return _deny(
            Reason.STALE_EPOCH,
            f"lease epoch {request.lease_epoch} is stale; the current epoch is {lease.epoch}",
            lease,
            **kw,
        )

    matching = [
        g
        for g in grants
        if g.principal == request.principal
        and g.target == request.target
        and request.verb in g.verbs
        and (not g.origins or origin in g.origins)
    ]
    active = [g for g in matching if g.is_active(now_ms)]
    what = f"{request.verb} on {origin or 'this target'}"
    if not active:
        if not matching:
            return _deny(
                Reason.OUT_OF_SCOPE,
                f"no grant allows {what} for {request.principal!r}",
                lease,
                **kw,
            )
        revoked = [g for g in matching if g.revoked]
        if revoked:
            return _deny(
                Reason.GRANT_REVOKED,
                f"the grant for {what} was revoked",
                lease,
                grant_id=revoked[-1].grant_id,
                **kw,
            )
        return _deny(
            Reason.GRANT_EXPIRED,
            f"the grant for {what} has expired",
            lease,
            grant_id=matching[-1].grant_id,
            **kw,
        )
    grant = active[0]
    if policy.forbidden:
        names = ", ".join(policy.policies) or "(unnamed)"
        return _deny(
            Reason.POLICY_FORBID,
            policy.message or f"forbidden by policy {names}",
            lease,
            policies=policy.policies,
            grant_id=grant.grant_id,
            **kw,
        )
    return Decision(
        True,
        Reason.ALLOW.value,
        f"allowed by grant {grant.grant_id}",
        decision_id=decision_id,
        grant_id=grant.grant_id,
        lease_epoch=lease.epoch,
    )


# --- who may do what --------------------------------------------------------------------------

_GRANTERS = frozenset({"operator", "admin"})
_CHECKERS = frozenset({"agent", "executor", "admin"})
_LEASE_USERS = frozenset({"agent", "executor", "operator", "admin"})


def require_role(caller: Principal, allowed: frozenset[str] | Sequence[str], what: str) -> None:
    """Raise PermissionDeniedError unless ``caller.role`` is in ``allowed``."""
    if caller.role not in allowed:
        raise PermissionDeniedError(f"role {caller.role} may not {what}")


def authorize_check(caller: Principal, principal: str) -> None:
    """Executors and admins check for anyone, an agent only for itself."""
    require_role(caller, _CHECKERS, "call Check")
    if caller.role == "agent" and principal != caller.name:
        raise PermissionDeniedError(
            f"role agent may only check for itself ({caller.name!r}), not {principal!r}"
        )


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
            raise PermissionDeniedError(
                f"role agent may only {what} for itself ({caller.name!r}), not {holder!r}"
            )
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
            f"the lease on {lease.target!r} was handed back to {lease.next_holder!r}; "
            f"{holder!r} may not acquire it"
        )
    return LeaseInfo(lease.target, HolderKind.AGENT.value, holder, lease.epoch + 1, now_ms + ttl)


def _require_holder(lease: LeaseInfo, holder: str, epoch: int, what: str) -> None:
    if lease.holder_kind != HolderKind.AGENT or lease.holder != holder:
        held = _describe(lease) if lease.holder_kind else "nobody"
        raise LeaseConflictError(
            f"cannot {what} the lease on {lease.target!r}: it is held by {held}, not {holder!r}"
        )
    if epoch != lease.epoch:
        raise LeaseConflictError(
            f"cannot {what} the lease on {lease.target!r}: epoch {epoch} is stale "
            f"(current {lease.epoch})"
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
    """A person takes control: always succeeds, always bumps the epoch."""
    ttl = check_ttl("ttl_ms", ttl_ms, DEFAULT_HUMAN_TTL_MS)
    return LeaseInfo(lease.target, HolderKind.HUMAN.value, operator, lease.epoch + 1, now_ms + ttl)


def lease_hand_back(lease: LeaseInfo, epoch: int, next_holder: str, now_ms: int) -> LeaseInfo:
    """An operator frees the lease, optionally reserving it for one agent; bumps the epoch."""
    check_text("next_holder", next_holder)
    if epoch != lease.epoch:
        raise LeaseConflictError(
            f"cannot hand back the lease on {lease.target!r}: epoch {epoch} is stale "
            f"(current {lease.epoch})"
        )
    return LeaseInfo(lease.target, "", "", lease.epoch + 1, 0, next_holder)
