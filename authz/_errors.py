"""Errors of the authorization sidecar and its client.

Every error below carries a ``reason`` code (see :class:`handrail._errors.HandrailError`)::

    HandrailError
    └── AuthzError
        ├── InvalidArgumentError     a request field is wrong (``.field`` names it)
        ├── UnauthenticatedError     missing or unknown bearer token
        ├── PermissionDeniedError    the caller's role may not do this
        ├── NotFoundError            no such grant / principal
        ├── LeaseConflictError       a lease compare-and-set lost (held, stale epoch)
        ├── AlreadyExistsError       a principal name or token is taken
        ├── PolicyError              a Cedar policy or schema file is broken (``.file``, ``.line``)
        ├── AuthzUnavailableError    client: the sidecar is unreachable or past its deadline
        ├── StoreUnavailableError    server: the store's database cannot be reached
        └── AuthzRpcError            client: any other gRPC error (``.code_name``, ``.details``)

Each edge maps foreign errors in one place: the servicer turns these errors into gRPC status
codes (``_service._rpc``); both clients turn gRPC errors into :class:`AuthzUnavailableError`
and :class:`AuthzRpcError` (``_channel.map_grpc_errors``); the SQLite store turns a taken
name into :class:`AlreadyExistsError`; the PostgreSQL store turns psycopg's connection
errors into :class:`StoreUnavailableError` (``_pg_db.PgDatabase.run``).
"""

from __future__ import annotations

from handrail._errors import HandrailError


class AuthzError(HandrailError):
    """Base of every error of :mod:`handrail.authz`."""

    reason = "AUTHZ_ERROR"


class InvalidArgumentError(AuthzError):
    """A request field is invalid; the message starts with ``"<field>: "``.

    Attributes:
        field: the name of the offending field (``"target"``, ``"grant.origins[0]"`` ...).
    """

    reason = "INVALID_ARGUMENT"

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class UnauthenticatedError(AuthzError):
    """The call carried no bearer token, or one that names no principal."""

    reason = "UNAUTHENTICATED"


class PermissionDeniedError(AuthzError):
    """The caller's role does not allow the call."""

    reason = "PERMISSION_DENIED"


class NotFoundError(AuthzError):
    """The named grant or principal does not exist."""

    reason = "NOT_FOUND"


class AlreadyExistsError(AuthzError):
    """A principal with that name or token already exists."""

    reason = "ALREADY_EXISTS"


class LeaseConflictError(AuthzError):
    """A lease operation's precondition failed (held by another, wrong holder, stale epoch)."""

    reason = "FAILED_PRECONDITION"


class PolicyError(AuthzError):
    """A Cedar policy or schema file does not parse, validate or carry an ``@id``.

    ``str(error)`` reads ``FILE:LINE: message``.

    Attributes:
        file: the path of the offending file.
        line: the 1-based line of the offending policy (1 when unknown).
        detail: the message without the location.
    """

    reason = "POLICY_ERROR"

    def __init__(self, file: str, line: int, detail: str) -> None:
        super().__init__(f"{file}:{line}: {detail}")
        self.file = file
        self.line = line
        self.detail = detail


class AuthzUnavailableError(AuthzError):
    """The sidecar could not be reached or did not answer within the deadline.

    Callers must treat this as a refusal (fail closed).
    """

    reason = "AUTHZ_UNAVAILABLE"


class AuthzRpcError(AuthzError):
    """The sidecar answered a call with an error status other than unavailability.

    Attributes:
        code_name: the gRPC status code name (``"PERMISSION_DENIED"`` ...).
        details: the server's message.
    """

    def __init__(self, code_name: str, details: str) -> None:
        super().__init__(f"{code_name}: {details}", reason=code_name)
        self.code_name = code_name
        self.details = details


class StoreUnavailableError(AuthzError):
    """The store's database cannot be reached (a PostgreSQL server that is down, a lost
    connection, no pooled connection in time). The servicer answers ``UNAVAILABLE``, so a
    client tries another replica or fails closed.
    """

    reason = "AUTHZ_UNAVAILABLE"
