"""Errors of the executor.

::

    HandrailError
    └── ExecutorError
        ├── InvalidArgumentError   a request field is missing, malformed or too large
        ├── NotFoundError          an unknown session, observation or ref
        ├── UnauthenticatedError   no or a bad bearer token
        ├── PermissionDeniedError  the caller's role may not call this (operator-only RPCs)
        ├── SessionClosedError     the session was closed
        ├── BackendError           the browser or desktop could not be started or used
        ├── ExecutorRpcError       (SDK) the executor answered a call with an error status
        │   └── ExecutorUnavailableError   (SDK) unreachable, or no answer by the deadline
        └── ActionError            (SDK, raise_for_outcome) an action that did not end DONE
            ├── ActionRefusedError     REFUSED; one subclass per ``Reason`` (REFUSAL_ERRORS)
            ├── ActionFailedError      FAILED
            └── OutcomeUnknownError    UNKNOWN

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
    """The caller's role may not make this call (the console's RPCs are operators' only)."""

    reason = "PERMISSION_DENIED"


class SessionClosedError(ExecutorError):
    """The session was closed."""

    reason = "FAILED_PRECONDITION"


class BackendError(ExecutorError):
    """The browser or desktop could not be started or used."""

    reason = "BACKEND"


class ExecutorRpcError(ExecutorError):
    """The executor answered an SDK call with an error status.

    Attributes:
        code_name: the gRPC status name (``"INVALID_ARGUMENT"``, ``"NOT_FOUND"`` ...); also
            the error's ``reason``.
    """

    def __init__(self, code_name: str, details: str) -> None:
        super().__init__(f"{code_name}: {details}", reason=code_name)
        self.code_name = code_name
        self._details = details

    def details(self) -> str:
        """The executor's message; for a bad field it starts with the field's name."""
        return self._details


class ExecutorUnavailableError(ExecutorRpcError):
    """The executor could not be reached, or did not answer within the call's deadline."""


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


def raise_for_outcome(result: _Ended) -> None:
    """Raise the typed error of a result that is not DONE or RECONCILED."""
    if result.outcome in (Outcome.DONE, Outcome.RECONCILED):
        return
    text = f"{result.outcome.value} {result.reason}: {result.message}"
    if result.outcome is Outcome.UNKNOWN:
        raise OutcomeUnknownError(result, text)
    if result.outcome is Outcome.FAILED:
        raise ActionFailedError(result, text)
    cls = REFUSAL_ERRORS.get(result.reason, ActionRefusedError)  # type: ignore[call-overload]
    raise cls(result, text)
