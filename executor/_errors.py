"""Errors of the executor.

::

    HandrailError
    └── ExecutorError
        ├── InvalidArgumentError   a request field is missing, malformed or too large
        ├── NotFoundError          an unknown session, observation or ref
        ├── UnauthenticatedError   no or a bad bearer token
        ├── SessionClosedError     the session was closed
        └── BackendError           the browser could not be started or used
"""

from __future__ import annotations

from handrail._errors import HandrailError


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


class SessionClosedError(ExecutorError):
    """The session was closed."""

    reason = "FAILED_PRECONDITION"


class BackendError(ExecutorError):
    """The browser could not be started or used."""

    reason = "BACKEND"


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


def _refusal(name: str, reason: str, doc: str) -> type[ActionRefusedError]:
    return type(name, (ActionRefusedError,), {"reason": reason, "__doc__": doc})


StaleObservationError = _refusal("StaleObservationError", "STALE_OBSERVATION", "Observe again.")
StaleRefError = _refusal("StaleRefError", "STALE_REF", "The cited element changed: observe again.")
TargetChangedError = _refusal("TargetChangedError", "TARGET_CHANGED", "The window moved or resized.")
FocusMismatchError = _refusal("FocusMismatchError", "FOCUS_MISMATCH", "Another window has focus.")
IdempotencyConflictError = _refusal(
    "IdempotencyConflictError", "IDEMPOTENCY_CONFLICT", "The key was used with other parameters."
)
ReconcileRequiredError = _refusal(
    "ReconcileRequiredError", "RECONCILE_REQUIRED", "An UNKNOWN action awaits reconciliation."
)
NoLeaseError = _refusal("NoLeaseError", "NO_LEASE", "The agent holds no control lease.")
StaleEpochError = _refusal("StaleEpochError", "STALE_EPOCH", "The lease changed hands since.")
HeldByHumanError = _refusal("HeldByHumanError", "HELD_BY_HUMAN", "A person holds the lease.")
OutOfScopeError = _refusal("OutOfScopeError", "OUT_OF_SCOPE", "No grant covers the action.")
GrantExpiredError = _refusal("GrantExpiredError", "GRANT_EXPIRED", "The grant expired.")
GrantRevokedError = _refusal("GrantRevokedError", "GRANT_REVOKED", "The grant was revoked.")
GrantExhaustedError = _refusal("GrantExhaustedError", "GRANT_EXHAUSTED", "A single-use grant was used.")
PolicyForbidError = _refusal("PolicyForbidError", "POLICY_FORBID", "A standing policy forbids it.")
ApprovalRequiredError = _refusal(
    "ApprovalRequiredError", "APPROVAL_REQUIRED", "An operator must approve it (see approval_id)."
)
ApprovalDeniedError = _refusal("ApprovalDeniedError", "APPROVAL_DENIED", "An operator denied this action.")
ApprovalExpiredError = _refusal(
    "ApprovalExpiredError", "APPROVAL_EXPIRED", "No operator decided before the deadline: a deny."
)
AuthzUnavailableRefusalError = _refusal(
    "AuthzUnavailableRefusalError", "AUTHZ_UNAVAILABLE", "The authz sidecar did not answer."
)

REFUSAL_ERRORS: dict[str, type[ActionRefusedError]] = {
    cls.reason: cls
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
