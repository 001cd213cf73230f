"""Who a caller is, and whether a named principal is a live agent: the sidecar's identity rules.

Revocation and expiry act on the very next call: every lookup goes to the store, which
forgets what it remembered as soon as any principal changes (see
:mod:`._sqlite_principals`). A token of a revoked or expired principal is refused with its
own reason, so that the caller knows what to fix.
"""

from __future__ import annotations

from handrail.authz._core import MAX_FIELD_CHARS
from handrail.authz._errors import LeaseConflictError, NotFoundError, UnauthenticatedError
from handrail.authz._models import Principal, PrincipalInfo, PrincipalState, Role
from handrail.authz._store import AuthzStore


def authenticate(store: AuthzStore, token: str) -> Principal:
    """The caller a bearer token names.

    Raises:
        UnauthenticatedError: no token (reason TOKEN_MISSING), one that names nobody
            (TOKEN_UNKNOWN), or one of a revoked (TOKEN_REVOKED) or expired
            (TOKEN_EXPIRED) principal.
    """
    check_token(token)
    info, now = store.identify(token)  # the principal and the clock in one read
    return caller(info, now)


def check_token(token: str) -> None:
    """Refuse, before any read, a token that cannot name anyone (see :func:`authenticate`)."""
    if not token:
        raise UnauthenticatedError("missing 'authorization: Bearer <token>' metadata", reason="TOKEN_MISSING")
    if len(token) > MAX_FIELD_CHARS:
        raise UnauthenticatedError("unknown bearer token", reason="TOKEN_UNKNOWN")


def caller(info: PrincipalInfo | None, now: int) -> Principal:
    """The caller whose token names ``info`` (as the store has it at ``now``; None: the
    token names nobody); raises :class:`UnauthenticatedError` as :func:`authenticate` does."""
    if info is None:
        raise UnauthenticatedError("unknown bearer token", reason="TOKEN_UNKNOWN")
    state = info.state(now)
    if state is PrincipalState.REVOKED:
        raise UnauthenticatedError("the token's principal was revoked", reason="TOKEN_REVOKED")
    if state is PrincipalState.EXPIRED:
        raise UnauthenticatedError("the token has expired", reason="TOKEN_EXPIRED")
    return Principal(info.name, info.role, info.expires_at_ms)


def live_agent(store: AuthzStore, name: str, field: str) -> PrincipalInfo:
    """The agent principal ``name``, live.

    Raises:
        NotFoundError: no agent of that name (naming ``field``; reason UNKNOWN_PRINCIPAL).
        LeaseConflictError: it is revoked or expired (reason PRINCIPAL_REVOKED / _EXPIRED).
    """
    info, now = store.principal_now(name)
    if info is None or info.role != Role.AGENT:
        raise NotFoundError(f"no agent principal {name!r}", field=field, reason="UNKNOWN_PRINCIPAL")
    state = info.state(now)
    if state is not PrincipalState.ACTIVE:
        raise LeaseConflictError(f"principal {name!r} is {state.value}", reason=f"PRINCIPAL_{state.name}")
    return info


def not_a_live_agent(info: PrincipalInfo | None, name: str, now: int) -> str:
    """Why the principal ``name`` (``info`` as the store has it at ``now``; None: unknown)
    may not be acted for (unknown, not an agent, revoked, expired), or ``""``."""
    if info is None:
        return f"principal {name!r} is unknown"
    if info.role != Role.AGENT:
        return f"principal {name!r} is not an agent"
    state = info.state(now)
    return "" if state is PrincipalState.ACTIVE else f"principal {name!r} is {state.value}"
