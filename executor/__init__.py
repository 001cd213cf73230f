"""The executor: sessions on a browser; every write goes observe -> check -> act -> re-observe."""

from __future__ import annotations

from handrail.executor._client import BrowserSession, ExecutorClient
from handrail.executor._errors import (
    BackendError,
    ExecutorError,
    InvalidArgumentError,
    NotFoundError,
    SessionClosedError,
    UnauthenticatedError,
)
from handrail.executor._models import (
    ActionKind,
    ActionResult,
    ActionSpec,
    ActResponse,
    Evidence,
    Expectation,
    Observation,
    Outcome,
    SessionInfo,
)

__all__ = [
    "ActResponse",
    "ActionKind",
    "ActionResult",
    "ActionSpec",
    "BackendError",
    "BrowserSession",
    "Evidence",
    "ExecutorClient",
    "ExecutorError",
    "Expectation",
    "InvalidArgumentError",
    "NotFoundError",
    "Observation",
    "Outcome",
    "SessionClosedError",
    "SessionInfo",
    "UnauthenticatedError",
]
