"""Errors of the executor.

::

    HandrailError
    └── ExecutorError
        ├── InvalidArgumentError   a request field is missing, malformed or too large
        ├── NotFoundError          an unknown session, observation or ref (or another agent's)
        ├── UnauthenticatedError   no or a bad bearer token
        ├── PermissionDeniedError  a token of another role than the call needs (an
        │   │                      agent's; an operator's for the console's RPCs)
        │   └── ScopeRefusedError  OpenSession's start_url is not granted (OUT_OF_SCOPE ...)
        ├── SessionClosedError     the session was closed
        ├── LeaseHeldError         another agent holds the target's lease
        ├── BackendError           the browser or desktop could not be started or used
        ├── TargetGoneError        the session's target no longer exists (its window was destroyed)
        ├── ExecutorRpcError       (SDK) the executor answered a call with an error status;
        │   │                      it is also the error of its code above (``except
        │   │                      NotFoundError`` catches a remote NOT_FOUND), with the
        │   │                      ErrorInfo's ``reason`` and ``field``
        │   └── ExecutorUnavailableError   (SDK) unreachable, or no answer by the deadline
        ├── ElementLookupError     (SDK, find) also a LookupError
        │   ├── ElementNotFoundError   no element has that role and name (within ...)
        │   └── AmbiguousElementError  more than one has; ``refs`` lists them
        └── ActionError            (SDK, raise_for_outcome) an action that did not end DONE
            ├── ActionRefusedError     REFUSED; one subclass per ``Reason`` (REFUSAL_ERRORS);
            │                          TargetGoneRefusedError is also a TargetGoneError
            ├── ActionFailedError      FAILED (with a reason, also that reason's class:
            │                          a dispatch-time STALE_REF is a StaleRefError)
            └── OutcomeUnknownError    UNKNOWN

The servicer answers each server-side error with its status code and an ``ErrorInfo``
(docs/errors.md); the SDK turns them back into this tree (``_wire.rpc_error``).

This module sits right above the shared vocabulary and imports nothing else of the
executor's, so that the data module can raise these without a loop.
"""

from __future__ import annotations

from typing import Protocol

from handrail._errors import HandrailError
from handrail._vocabulary import Outcome, Reason


class ExecutorError(HandrailError):
    """Base of the executor's errors."""


class InvalidArgumentError(ExecutorError):
    """A request field is missing, malformed or too large; ``field`` names it."""

    reason = "INVALID_ARGUMENT"

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class NotFoundError(ExecutorError):
    """An unknown session, observation or ref; ``field`` names the request field."""

    reason = "NOT_FOUND"

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class UnauthenticatedError(ExecutorError):
    """The caller's bearer token is missing or not the session's."""

    reason = "UNAUTHENTICATED"


class PermissionDeniedError(ExecutorError):
    """The caller's token is not of the role the call needs (an agent's; an operator's for
    the console's RPCs)."""

    reason = "PERMISSION_DENIED"


class SessionClosedError(ExecutorError):
    """The session was closed."""

    reason = "SESSION_CLOSED"


class LeaseHeldError(ExecutorError):
    """Another agent holds the lease of the target a session was asked for."""

    reason = "LEASE_HELD"


class ScopeRefusedError(PermissionDeniedError):
    """The sidecar refused a session's start page; ``decision_reason`` (also the
    ``ErrorInfo`` reason: ``OUT_OF_SCOPE`` ...) says why."""

    def __init__(self, decision_reason: str, message: str) -> None:
        super().__init__(f"{decision_reason}: {message}", reason=decision_reason)
        self.decision_reason = decision_reason


class BackendError(ExecutorError):
    """The browser or desktop could not be started or used."""

    reason = "BACKEND"


class TargetGoneError(ExecutorError):
    """The session's target no longer exists: its desktop window was destroyed.

    Nothing more can be observed or done in that session, and observing again will not
    help: close it and open a new session on the window that is there now. The executor
    raises it (gRPC ``FAILED_PRECONDITION``); the SDK raises it for such a call, then also
    an ``ExecutorRpcError``, and ``TargetGoneRefusedError`` for an action refused for it.
    """

    reason = "TARGET_GONE"


class ExecutorRpcError(ExecutorError):
    """The executor answered an SDK call with an error status.

    Attributes:
        code_name: the gRPC status name (``"INVALID_ARGUMENT"``, ``"NOT_FOUND"`` ...).
        reason: the ``ErrorInfo`` reason (``"LEASE_HELD"``, ``"TOKEN_REVOKED"`` ...), else
            the code's name.
        field: the bad request field (``ErrorInfo.metadata["field"]``), or ``""``.
        metadata: the whole ``ErrorInfo.metadata``.
    """

    def __init__(
        self, code_name: str, details: str, *, reason: str = "", metadata: dict[str, str] | None = None
    ) -> None:
        ExecutorError.__init__(self, f"{code_name}: {details}", reason=reason or code_name)
        self.code_name = code_name
        self._details = details
        self.metadata = dict(metadata or {})
        self.field = self.metadata.get("field", "")

    def details(self) -> str:
        """The executor's message; for a bad field it starts with the field's name."""
        return self._details


class ExecutorUnavailableError(ExecutorRpcError):
    """The executor could not be reached, or did not answer within the call's deadline."""


class RemoteInvalidArgumentError(ExecutorRpcError, InvalidArgumentError):
    """(SDK) INVALID_ARGUMENT: ``field`` names the bad field."""


class RemoteNotFoundError(ExecutorRpcError, NotFoundError):
    """(SDK) NOT_FOUND: an unknown id, or another agent's."""


class RemoteUnauthenticatedError(ExecutorRpcError, UnauthenticatedError):
    """(SDK) UNAUTHENTICATED: the token is missing, unknown, revoked or expired (``reason``)."""


class RemotePermissionDeniedError(ExecutorRpcError, PermissionDeniedError):
    """(SDK) PERMISSION_DENIED: the token is not an agent's."""


class RemoteFailedPreconditionError(ExecutorRpcError, SessionClosedError):
    """(SDK) FAILED_PRECONDITION: the state forbids the call now (``reason`` says which:
    SESSION_CLOSED, LEASE_HELD, BACKEND ...)."""


class RemoteLeaseHeldError(RemoteFailedPreconditionError, LeaseHeldError):
    """(SDK) FAILED_PRECONDITION, reason LEASE_HELD: another agent holds the target."""


class RemoteBackendError(RemoteFailedPreconditionError, BackendError):
    """(SDK) FAILED_PRECONDITION, reason BACKEND: the page or window could not be used."""


class RemoteTargetGoneError(RemoteFailedPreconditionError, TargetGoneError):
    """(SDK) FAILED_PRECONDITION, reason TARGET_GONE: the session's window was destroyed;
    close the session and open a new one (observing again will not help)."""


def remote_error_class(code_name: str, reason: str) -> type[ExecutorRpcError]:
    """The SDK's class of an error status (code and ErrorInfo reason)."""
    if code_name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return ExecutorUnavailableError
    if code_name == "FAILED_PRECONDITION":
        return {
            "LEASE_HELD": RemoteLeaseHeldError,
            "BACKEND": RemoteBackendError,
            "TARGET_GONE": RemoteTargetGoneError,
        }.get(reason, RemoteFailedPreconditionError)
    return {
        "INVALID_ARGUMENT": RemoteInvalidArgumentError,
        "NOT_FOUND": RemoteNotFoundError,
        "UNAUTHENTICATED": RemoteUnauthenticatedError,
        "PERMISSION_DENIED": RemotePermissionDeniedError,
    }.get(code_name, ExecutorRpcError)


class ElementLookupError(ExecutorError, LookupError):
    """``find`` could not name exactly one element (a ``LookupError`` too).

    Attributes:
        role, name: what was looked for.
        within: the container it was looked for in, as ``(role, name)``, or None.
    """

    reason = "NOT_FOUND"

    def __init__(self, message: str, role: str, name: str, within: tuple[str, str] | None) -> None:
        super().__init__(message)
        self.role, self.name, self.within = role, name, within


class ElementNotFoundError(ElementLookupError):
    """No element of the observation has that role and name (in that container)."""


class AmbiguousElementError(ElementLookupError):
    """More than one element has that role and name; ``refs`` are theirs, in page order."""

    reason = "AMBIGUOUS"

    def __init__(
        self, message: str, role: str, name: str, within: tuple[str, str] | None, refs: tuple[str, ...]
    ) -> None:
        super().__init__(message, role, name, within)
        self.refs = refs


class ActionError(ExecutorError):
    """An action that did not end DONE, raised by the SDK's ``raise_for_outcome``.

    Attributes:
        result: the ``ActionResult`` the executor returned.
    """

    def __init__(self, result: object, message: str) -> None:
        super().__init__(message)
        self.result = result


class ActionRefusedError(ActionError):
    """The executor refused the action before dispatch; ``reason`` says why."""


class ActionFailedError(ActionError):
    """The action is known not to have had its effect (``FAILED``)."""

    reason = "FAILED"


class OutcomeUnknownError(ActionError):
    """The action may have happened (``UNKNOWN``): observe and reconcile before any write."""

    reason = "UNKNOWN"


def _refusal(name: str, reason: Reason, doc: str) -> type[ActionRefusedError]:
    return type(name, (ActionRefusedError,), {"reason": reason, "__doc__": doc})


StaleObservationError = _refusal("StaleObservationError", Reason.STALE_OBSERVATION, "Observe again.")
StaleRefError = _refusal("StaleRefError", Reason.STALE_REF, "The cited element changed: observe again.")
TargetChangedError = _refusal("TargetChangedError", Reason.TARGET_CHANGED, "The window moved or resized.")
FocusMismatchError = _refusal("FocusMismatchError", Reason.FOCUS_MISMATCH, "Another window has focus.")
IdempotencyConflictError = _refusal(
    "IdempotencyConflictError", Reason.IDEMPOTENCY_CONFLICT, "The key was used with other parameters."
)
ReconcileRequiredError = _refusal(
    "ReconcileRequiredError", Reason.RECONCILE_REQUIRED, "An UNKNOWN action awaits reconciliation."
)
NoLeaseError = _refusal("NoLeaseError", Reason.NO_LEASE, "The agent holds no control lease.")
StaleEpochError = _refusal("StaleEpochError", Reason.STALE_EPOCH, "The lease changed hands since.")
HeldByHumanError = _refusal("HeldByHumanError", Reason.HELD_BY_HUMAN, "A person holds the lease.")
OutOfScopeError = _refusal("OutOfScopeError", Reason.OUT_OF_SCOPE, "No grant covers the action.")
GrantExpiredError = _refusal("GrantExpiredError", Reason.GRANT_EXPIRED, "The grant expired.")
GrantRevokedError = _refusal("GrantRevokedError", Reason.GRANT_REVOKED, "The grant was revoked.")
GrantExhaustedError = _refusal("GrantExhaustedError", Reason.GRANT_EXHAUSTED, "A single-use grant was used.")
PolicyForbidError = _refusal("PolicyForbidError", Reason.POLICY_FORBID, "A standing policy forbids it.")
ApprovalRequiredError = _refusal(
    "ApprovalRequiredError", Reason.APPROVAL_REQUIRED, "An operator must approve it (see approval_id)."
)
ApprovalDeniedError = _refusal("ApprovalDeniedError", Reason.APPROVAL_DENIED, "An operator denied this action.")
ApprovalExpiredError = _refusal(
    "ApprovalExpiredError", Reason.APPROVAL_EXPIRED, "No operator decided before the deadline: a deny."
)
AuthzUnavailableRefusalError = _refusal(
    "AuthzUnavailableRefusalError", Reason.AUTHZ_UNAVAILABLE, "The authz sidecar did not answer."
)


class TargetGoneRefusedError(ActionRefusedError, TargetGoneError):
    """The session's target window was destroyed: no retry will work, open a new session."""

    reason = Reason.TARGET_GONE


#: The refusal error of each reason an action can be refused for (keys are ``Reason``s,
#: which are strings: a reason read off the wire as text finds its class too).
REFUSAL_ERRORS: dict[Reason, type[ActionRefusedError]] = {
    Reason(cls.reason): cls
    for cls in (
        StaleObservationError,
        StaleRefError,
        TargetChangedError,
        FocusMismatchError,
        IdempotencyConflictError,
        ReconcileRequiredError,
        NoLeaseError,
        StaleEpochError,
        HeldByHumanError,
        OutOfScopeError,
        GrantExpiredError,
        GrantRevokedError,
        GrantExhaustedError,
        PolicyForbidError,
        ApprovalRequiredError,
        ApprovalDeniedError,
        ApprovalExpiredError,
        AuthzUnavailableRefusalError,
        TargetGoneRefusedError,
    )
}


class _Ended(Protocol):
    """What ``raise_for_outcome`` reads of an action's result."""

    @property
    def outcome(self) -> Outcome: ...

    @property
    def reason(self) -> str: ...

    @property
    def message(self) -> str: ...


_FAILED_WITH: dict[Reason, type[ActionFailedError]] = {}


def failed_error(reason: Reason) -> type[ActionFailedError]:
    """The error of a FAILED result with ``reason``: both ``ActionFailedError`` and the
    reason's refusal class (a dispatch-time STALE_REF is a ``StaleRefError`` too)."""
    cls = _FAILED_WITH.get(reason)
    if cls is None:
        base = REFUSAL_ERRORS[reason]
        cls = _FAILED_WITH[reason] = type(base.__name__, (base, ActionFailedError), {"__doc__": base.__doc__})
    return cls


def raise_for_outcome(result: _Ended) -> None:
    """Raise the typed error of a result that is not DONE or RECONCILED.

    The error is chosen by the reason whatever the outcome: a FAILED result with a reason
    raises that reason's class (which is also an ``ActionFailedError``).
    """
    if result.outcome in (Outcome.DONE, Outcome.RECONCILED):
        return
    reason = result.reason
    said = f" {reason}" if reason else ""
    text = f"{result.outcome.value}{said}: {result.message}"
    if result.outcome is Outcome.UNKNOWN:
        raise OutcomeUnknownError(result, text)
    known = reason in REFUSAL_ERRORS
    if result.outcome is Outcome.FAILED:
        raise (failed_error(Reason(reason)) if known else ActionFailedError)(result, text)
    cls = REFUSAL_ERRORS.get(reason, ActionRefusedError)  # type: ignore[call-overload]
    raise cls(result, text)
