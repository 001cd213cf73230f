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
        │   └── StoreBusyError       server: no connection (or writer) free in time
        ├── DeadlineExceededError    server: the caller's deadline passed first
        └── AuthzRpcError            client: any other gRPC error (``.code_name``, ``.details``,
                                     ``.field``, ``.metadata``; ``.reason`` is ErrorInfo's)

Each edge maps foreign errors in one place: the servicer turns these errors into gRPC status
codes with an ``ErrorInfo`` (``_service._rpc``, by the rule of :mod:`handrail._rpc`); both
clients turn gRPC errors back into this tree (``_channel.map_grpc_errors``): a status the
sidecar sent becomes an :class:`AuthzRpcError` that is also the error of its code
(``except PermissionDeniedError`` catches a remote PERMISSION_DENIED, ``except
InvalidArgumentError`` a remote bad field, with ``.field``); the SQLite store turns a taken
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
    """The named grant, approval, decision or principal does not exist (or is another
    principal's: the two are not told apart).

    Attributes:
        field: the request field that named it, when known.
    """

    reason = "NOT_FOUND"

    def __init__(self, message: str, *, field: str = "", reason: str | None = None) -> None:
        super().__init__(message, reason=reason)
        self.field = field


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
        reason: the ``ErrorInfo`` reason (``"LEASE_HELD"``, ``"TOKEN_REVOKED"`` ...), else
            the code's name.
        field: the bad request field (``ErrorInfo.metadata["field"]``), or ``""``.
        metadata: the whole ``ErrorInfo.metadata``.
    """

    def __init__(
        self,
        code_name: str,
        details: str,
        *,
        reason: str = "",
        metadata: dict[str, str] | None = None,
    ) -> None:
        AuthzError.__init__(self, f"{code_name}: {details}", reason=reason or code_name)
        self.code_name = code_name
        self.details = details
        self.metadata = dict(metadata or {})
        self.field = self.metadata.get("field", "")


class RemoteInvalidArgumentError(AuthzRpcError, InvalidArgumentError):
    """client: INVALID_ARGUMENT from the sidecar (``.field`` names the field)."""


class RemoteUnauthenticatedError(AuthzRpcError, UnauthenticatedError):
    """client: UNAUTHENTICATED from the sidecar (``.reason``: TOKEN_MISSING, TOKEN_UNKNOWN,
    TOKEN_REVOKED or TOKEN_EXPIRED)."""


class RemotePermissionDeniedError(AuthzRpcError, PermissionDeniedError):
    """client: PERMISSION_DENIED from the sidecar."""


class RemoteNotFoundError(AuthzRpcError, NotFoundError):
    """client: NOT_FOUND from the sidecar."""


class RemoteAlreadyExistsError(AuthzRpcError, AlreadyExistsError):
    """client: ALREADY_EXISTS from the sidecar."""


class RemoteConflictError(AuthzRpcError, LeaseConflictError):
    """client: FAILED_PRECONDITION from the sidecar (a lease conflict, a stale epoch, a
    broken policy set: ``.reason`` says which)."""


#: The client-side class of each status code the sidecar answers with.
REMOTE_ERRORS: dict[str, type[AuthzRpcError]] = {
    "INVALID_ARGUMENT": RemoteInvalidArgumentError,
    "UNAUTHENTICATED": RemoteUnauthenticatedError,
    "PERMISSION_DENIED": RemotePermissionDeniedError,
    "NOT_FOUND": RemoteNotFoundError,
    "ALREADY_EXISTS": RemoteAlreadyExistsError,
    "FAILED_PRECONDITION": RemoteConflictError,
}


class WatchBehindError(AuthzError):
    """A ``Watch`` stream fell too far behind, or passed an event it could not be told: the
    watcher must watch again with ``since_seq`` (``RESOURCE_EXHAUSTED``)."""

    reason = "WATCH_OVERFLOW"


class StoreUnavailableError(AuthzError):
    """The store's database cannot be reached (a PostgreSQL server that is down, a lost
    connection, no pooled connection in time). The servicer answers ``UNAVAILABLE``, so a
    client tries another replica or fails closed.

    Attributes:
        logged: it was logged where it arose (a refused statement), so a caller that would
            log it again need not.
    """

    reason = "AUTHZ_UNAVAILABLE"
    logged = False


class StoreBusyError(StoreUnavailableError):
    """Every connection to the store's database (PostgreSQL's pool) or its one writer
    (SQLite) stayed busy until the pool's timeout or, sooner, a margin before the caller's
    deadline (see :mod:`._deadline`). UNAVAILABLE: it passes, and the caller hears it in
    time to try another replica or fail closed knowing why.
    """


class DeadlineExceededError(AuthzError):
    """The caller's deadline passed before the work could start (or while a state
    change waited, which was then rolled back): nothing was done for it. The servicer
    answers ``DEADLINE_EXCEEDED``, which nobody may hear any more (see :mod:`._deadline`).
    """

    reason = "DEADLINE_EXCEEDED"
