"""The one base exception of the project.

Each package keeps its own errors in an ``_errors.py`` module, all below this one::

    HandrailError
    ├── handrail.authz.AuthzError ...
    ├── handrail.executor.ExecutorError ...
    ├── handrail.recorder.LedgerError ...
    └── handrail.scenarios.ScenarioError, RecordError, DisplayError
"""

from __future__ import annotations


class HandrailError(Exception):
    """Base of every error Handrail raises on purpose.

    Attributes:
        reason: a short machine-readable reason code (``"INVALID_ARGUMENT"``, ...).
    """

    reason: str = "ERROR"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
