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
