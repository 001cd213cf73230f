"""The seam between the guarded loop and what it drives (a browser now, a desktop later)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from handrail.executor._models import ActionSpec
from handrail.executor._snapshot import RefInfo


@dataclass(frozen=True)
class RawObservation:
    """What a backend saw, before the loop gives it an id and an epoch."""

    url: str
    title: str
    snapshot: str
    screenshot_png: bytes
    structure_version: int  # bumped by navigation; an action cites the version it saw


class DispatchStatus(enum.Enum):
    DONE = "done"
    NOT_STARTED = "not_started"  # known not to have reached the page
    MAYBE_STARTED = "maybe_started"  # the page may have received it


@dataclass(frozen=True)
class DispatchResult:
    status: DispatchStatus
    message: str = ""


class Backend(Protocol):
    """One controlled surface of a session (a browser page; later a desktop window)."""

    async def observe(self, *, screenshot: bool) -> RawObservation:
        """Take a fresh observation; refs of earlier observations stop resolving."""
        ...

    def structure_version(self) -> int:
        """The current structure version (navigation count) of the surface."""
        ...

    async def check_target(self, info: RefInfo) -> str | None:
        """Check, fast, that ``info.ref`` still resolves to the same element.

        Returns None when it does, else a sentence that says what changed.
        """
        ...

    async def dispatch(self, spec: ActionSpec, timeout_ms: int) -> DispatchResult:
        """Perform one bounded action; never forced past the page's own checks."""
        ...

    async def settle(self, timeout_ms: int) -> None:
        """Wait, boundedly, for the surface to settle after an action."""
        ...

    async def text_visible(self, text: str) -> bool:
        """Whether ``text`` is visible on the surface now."""
        ...

    def current_url(self) -> str: ...

    async def close(self) -> None: ...
