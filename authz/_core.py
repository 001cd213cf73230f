"""The pure rules of the sidecar: request validation, who may do what, lease transitions.

Nothing here does I/O. The records these rules take and return live in :mod:`._models`;
the decision function lives in :mod:`._decide`. Lease transitions take the current row and
the store's clock and return the next row (or raise), and the store writes them with a
compare-and-set on the epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from handrail._patterns import PatternError, glob_matcher
from handrail._vocabulary import VERBS, Reason
from handrail.authz import _urls
from handrail.authz._errors import (
    InvalidArgumentError,
    LeaseConflictError,
    PermissionDeniedError,
)
from handrail.authz._models import (
    DEFAULT_APPROVAL_TIMEOUT_MS,
    ROLES,
    ApprovalInfo,
    ApprovalStatus,
    CheckInput,
    Decision,
    DecisionRecord,
    ElementContext,
    GrantInfo,
    HolderKind,
    LeaseInfo,
    PolicyResult,
    Principal,
    Role,
    WatchEventInfo,
    is_pattern,
)

__all__ = [
    "ADMINS",
    "DEFAULT_AGENT_TTL_MS",
    "DEFAULT_HUMAN_TTL_MS",
    "DESK_REPORTERS",
    "MANAGERS",
    "MAX_APPROVAL_TIMEOUT_MS",
    "MAX_FIELD_CHARS",
    "MAX_TTL_MS",
    "PRINCIPAL_READERS",
    "READERS",
    "WATCHERS",
    "authorize_check",
    "authorize_manage",
    "check_role",
    "check_text",
    "check_ttl",
    "check_verb",
    "desk_holder",
    "grant_expiry",
    "lease_acquire",
    "lease_expire",
    "lease_hand_back",
    "lease_release",
    "lease_renew",
    "lease_report_activity",
    "lease_take_over",
    "normalize_origin",
    "require_role",
    "resolve_holder",
    "url_origin",
    "validate_check",
    "validate_grant",
]
# Old import paths, kept for one release: the records moved to ._models and the shared words
# to handrail._vocabulary (tests/authz/test_exports.py pins these names).
__all__ += [
    "DEFAULT_APPROVAL_TIMEOUT_MS",
    "ROLES",
    "VERBS",
    "ApprovalInfo",
    "ApprovalStatus",
    "CheckInput",
    "Decision",
    "DecisionRecord",
    "GrantInfo",
    "HolderKind",
    "LeaseInfo",
    "PolicyResult",
    "Principal",
    "Reason",
    "WatchEventInfo",
    "is_pattern",
]

#: Longest accepted string field, in characters.
MAX_FIELD_CHARS = 4096

#: The largest lease epoch a check may name (the wire's int64).
MAX_EPOCH = 2**63 - 1

#: Pattern fields of a grant, each a tuple of fnmatch patterns.
_PATTERN_FIELDS = (
    "path_globs",
    "role_patterns",
    "name_patterns",
    "window_class_patterns",
    "window_title_patterns",
)

MAX_APPROVAL_TIMEOUT_MS = 24 * 60 * 60_000

DEFAULT_AGENT_TTL_MS = 30_000
DEFAULT_HUMAN_TTL_MS = 10 * 60_000
MAX_TTL_MS = 60 * 60_000

#: Bounds of a grant's lifetime given as ``ttl_ms`` (one second, ten years).
MIN_GRANT_TTL_MS = 1000
MAX_GRANT_TTL_MS = 10 * 365 * 24 * 3600_000

# --- validation -------------------------------------------------------------------------------


def check_text(field: str, value: str, *, required: bool = False) -> str:
    """Return ``value`` if it is a ``str``, short enough (and non-empty when required) and
    text that UTF-8 can carry (see :func:`holds_surrogate`)."""
    if not isinstance(value, str):
        raise InvalidArgumentError(field, f"must be text, not {type(value).__name__}")
    if required and not value:
        raise InvalidArgumentError(field, "must not be empty")
    if len(value) > MAX_FIELD_CHARS:
        raise InvalidArgumentError(field, f"longer than {MAX_FIELD_CHARS} characters")
    if holds_surrogate(value):
        raise InvalidArgumentError(field, "holds a lone surrogate (U+D800 to U+DFFF), which is not text")
    if "\0" in value:  # PostgreSQL's text cannot hold one; libpq's parameters end at it
        raise InvalidArgumentError(field, "must not contain NUL (U+0000)")
    return value


def holds_surrogate(value: str) -> bool:
    """Whether ``value`` holds a surrogate code point. The wire cannot carry one (protobuf
    strings are UTF-8), but a Python caller can pass one, and neither database can store
    it: a check's decision is acknowledged before its row is written, so such a value let
    in would fail every later flush of the decision log."""
    if value.isascii():
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return True
    return False


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


def grant_expiry(ttl_ms: int, expires_at_ms: int, now_ms: int) -> int:
    """A grant's ``expires_at_ms`` for a lifetime of ``ttl_ms`` from ``now_ms`` (the store's
    clock); ``expires_at_ms`` as asked when ``ttl_ms`` is 0.

    Raises:
        InvalidArgumentError: ``ttl_ms`` out of bounds, or given with ``grant.expires_at_ms``.
    """
    if not ttl_ms:
        return expires_at_ms
    if expires_at_ms:
        raise InvalidArgumentError("ttl_ms", "give ttl_ms or grant.expires_at_ms, not both")
    if not MIN_GRANT_TTL_MS <= ttl_ms <= MAX_GRANT_TTL_MS:
        raise InvalidArgumentError(
            "ttl_ms", f"must be {MIN_GRANT_TTL_MS} (one second) to {MAX_GRANT_TTL_MS} (ten years), not {ttl_ms}"
        )
    return now_ms + ttl_ms


def url_origin(field: str, url: str) -> str:
    """Return the origin ``scheme://host[:port]`` of ``url`` as a browser computes it.

    WHATWG parsing (see :mod:`._urls`): default ports left out, hosts lowercased and in
    punycode, IPv4 in dotted decimal; ``null`` for an opaque origin (``data:``,
    ``javascript:``, ``file:`` ...). An empty URL has the empty origin (desktop targets).
    Raises InvalidArgumentError for a URL a browser would not load.
    """
    return _urls.url_origin(field, url)


def normalize_origin(field: str, origin: str) -> str:
    """Validate a grant origin (``scheme://host[:port]``, nothing else) and normalize it."""
    check_text(field, origin, required=True)
    return _urls.grant_origin(field, origin)


def validate_check(request: CheckInput) -> str:
    """Validate a check request; return the origin of its URL.

    Raises:
        InvalidArgumentError: naming the first offending field.
    """
    r = request
    if not isinstance(r.context, ElementContext):
        raise InvalidArgumentError("context", f"must be an ElementContext, not {type(r.context).__name__}")
    texts = (
        r.principal,
        r.target,
        r.element_role,
        r.element_name,
        r.window_class,
        r.window_title,
        r.action_id,
        r.fingerprint,
        r.observation_id,
        r.url,
        r.approval_asked,
        r.context.dialog_title,
        r.context.form_name,
        r.context.heading,
        r.context.description,
        r.context.visible_text,
    )
    try:  # every field checked at once (the usual case)
        joined = "".join(texts)
        usual = (
            "\0" not in joined
            and not holds_surrogate(joined)
            and max(map(len, texts)) <= MAX_FIELD_CHARS
            and type(r.lease_epoch) is int
            and 0 <= r.lease_epoch <= MAX_EPOCH
            and type(r.password_field) is bool
            and type(r.document_load) is bool
            and r.principal != ""
            and r.target != ""
            and r.verb in VERBS
        )
    except TypeError:  # a field that is not text: named below
        usual = False
    if usual:
        return url_origin("resource.url", r.url)
    check_text("principal", request.principal, required=True)
    check_text("target", request.target, required=True)
    if type(request.lease_epoch) is not int:
        raise InvalidArgumentError("lease_epoch", f"must be an integer, not {type(request.lease_epoch).__name__}")
    if request.lease_epoch < 0:
        raise InvalidArgumentError("lease_epoch", "must not be negative")
    if request.lease_epoch > MAX_EPOCH:
        raise InvalidArgumentError("lease_epoch", f"must be at most {MAX_EPOCH} (the wire's int64)")
    check_verb("verb", request.verb)
    check_text("resource.element_role", request.element_role)
    check_text("resource.element_name", request.element_name)
    check_text("resource.window_class", request.window_class)
    check_text("resource.window_title", request.window_title)
    check_text("action_id", request.action_id)
    check_text("fingerprint", request.fingerprint)
    check_text("observation_id", request.observation_id)
    check_text("approval_asked", request.approval_asked)
    for name in ("dialog_title", "form_name", "heading", "description", "visible_text"):
        check_text(f"resource.{name}", getattr(request.context, name))
    check_text("resource.url", request.url)
    for name, flag in (("resource.password_field", r.password_field), ("resource.document_load", r.document_load)):
        if type(flag) is not bool:  # the log writes a flag as JSON true or false
            raise InvalidArgumentError(name, f"must be a bool, not {type(flag).__name__}")
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
    for name, values in patterns.items():
        for i, glob in enumerate(values):
            try:
                glob_matcher(glob)
            except PatternError as exc:
                raise InvalidArgumentError(f"grant.{name}[{i}]", str(exc)) from None
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


# --- who may do what --------------------------------------------------------------------------

_GRANTERS = frozenset({Role.OPERATOR, Role.ADMIN})
PRINCIPAL_READERS = frozenset({Role.OPERATOR, Role.ADMIN})
_CHECKERS = frozenset({Role.AGENT, Role.EXECUTOR, Role.ADMIN})
_LEASE_USERS = frozenset({Role.AGENT, Role.EXECUTOR, Role.OPERATOR, Role.ADMIN})
WATCHERS = frozenset({Role.EXECUTOR, Role.OPERATOR, Role.ADMIN})
DESK_REPORTERS = frozenset({Role.EXECUTOR, Role.ADMIN})
ADMINS = frozenset({Role.ADMIN})
MANAGERS = _GRANTERS
READERS = frozenset({Role.EXECUTOR, Role.OPERATOR, Role.ADMIN})


def require_role(caller: Principal, allowed: frozenset[str] | Sequence[str], what: str) -> None:
    """Raise PermissionDeniedError unless ``caller.role`` is in ``allowed``."""
    if caller.role not in allowed:
        raise PermissionDeniedError(f"role {caller.role} may not {what}")


def authorize_check(caller: Principal, principal: str) -> None:
    """Executors and admins check for anyone, an agent only for itself."""
    require_role(caller, _CHECKERS, "call Check")
    if caller.role == Role.AGENT and principal != caller.name:
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
    if caller.role == Role.AGENT:
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
        raise LeaseConflictError(f"the lease on {lease.target!r} is held by {_describe(lease)}", reason="LEASE_HELD")
    if lease.next_holder and lease.next_holder != holder:
        raise LeaseConflictError(
            f"the lease on {lease.target!r} was handed back to {lease.next_holder!r}; {holder!r} may not acquire it",
            reason="LEASE_RESERVED",
        )
    return LeaseInfo(lease.target, HolderKind.AGENT.value, holder, lease.epoch + 1, now_ms + ttl)


def _require_holder(lease: LeaseInfo, holder: str, epoch: int, what: str) -> None:
    if lease.holder_kind != HolderKind.AGENT or lease.holder != holder:
        held = _describe(lease) if lease.holder_kind else "nobody"
        raise LeaseConflictError(
            f"cannot {what} the lease on {lease.target!r}: it is held by {held}, not {holder!r}", reason="NOT_HOLDER"
        )
    if epoch != lease.epoch:
        raise LeaseConflictError(
            f"cannot {what} the lease on {lease.target!r}: epoch {epoch} is stale (current {lease.epoch})",
            reason="STALE_EPOCH",
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
            f"cannot hand back the lease on {lease.target!r}: epoch {epoch} is stale (current {lease.epoch})",
            reason="STALE_EPOCH",
        )
    return LeaseInfo(lease.target, "", "", lease.epoch + 1, 0, next_holder)
