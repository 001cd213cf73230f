"""The seam between the guarded loop and what it drives: a browser page or a desktop window.

The loop (``_guard``) owns everything that does not depend on the surface: sessions,
observation ids and epochs, idempotency, authz, the ledger and the fence. A backend owns
what does: how to observe, how to tell that the element or window an agent cites is
still the one it saw, how to describe the action to authz, how to dispatch it boundedly,
and how to check an expectation. The backends are the sub-packages ``browser`` and
``desktop``; ``testing.FakeBackend`` is a scripted one for tests of the loop.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from handrail._vocabulary import Reason
from handrail.executor._models import (
    ActionSpec,
    DesktopState,
    DialogInfo,
    Element,
    Expectation,
    FrameInfo,
    Observation,
    TabInfo,
)
from handrail.executor._snapshot import RefInfo


@dataclass(frozen=True)
class ObserveOptions:
    screenshot: bool = False
    screenshot_scale: float = 1.0  # (0, 1]
    viewport_only: bool = False
    depth: int = 0  # 0 = the whole tree


@dataclass(frozen=True)
class RawObservation:
    """What a backend saw, before the loop gives it an id and an epoch."""

    url: str = ""
    title: str = ""
    snapshot: str = ""
    screenshot_png: bytes = b""
    screenshot_scale: float = 1.0
    tabs: tuple[TabInfo, ...] = ()
    active_tab: str = ""
    frames: tuple[FrameInfo, ...] = ()
    dialogs: tuple[DialogInfo, ...] = ()
    viewport_width: int = 0
    viewport_height: int = 0
    mutation_counter: int = 0
    desktop: DesktopState | None = None
    # The structured element list (browser): the only source a cited ref is resolved from.
    elements: tuple[Element, ...] = ()


@dataclass(frozen=True)
class Refusal:
    """A check that failed: the reason code and a sentence that says what changed."""

    reason: Reason
    message: str


@dataclass(frozen=True)
class AuthzResource:
    """What the action touches, as the authz sidecar is told."""

    url: str = ""
    element_role: str = ""
    element_name: str = ""
    window_class: str = ""
    window_title: str = ""
    password_field: bool = False


class DispatchStatus(enum.Enum):
    DONE = "done"
    NOT_STARTED = "not_started"  # known not to have reached the surface
    MAYBE_STARTED = "maybe_started"  # the surface may have received it
    PARTIAL = "partial"  # known to have partly happened (desktop typing cut short)


@dataclass(frozen=True)
class DispatchResult:
    status: DispatchStatus
    message: str = ""
    typed_chars: int = 0
    reason: Reason | None = None  # for PARTIAL / NOT_STARTED: the check that stopped it, if any
    via: str = ""  # how the input went out, where a backend has more than one way


# A backend calls this when it sees a person act on its surface (desktop).
HumanActivityCallback = Callable[[str], Awaitable[None]]


class Backend(Protocol):
    """One controlled surface of a session."""

    kind: str  # "browser" or "desktop"

    async def observe(self, options: ObserveOptions) -> RawObservation:
        """Take a fresh observation; refs of earlier observations stop resolving."""
        ...

    async def check_fresh(self, cited: Observation, spec: ActionSpec, target: RefInfo | None) -> Refusal | None:
        """Check, fast, that nothing the action relies on changed since ``cited``.

        The loop has already checked that ``cited`` is the session's latest observation
        under the current epoch. The backend checks its surface: for a browser, that the
        page did not navigate, no dialog opened, the tab is the cited one and the ref still
        resolves to the same element, attached, visible, enabled and not covered; for a
        desktop, that the target window has focus with the same geometry and the point
        lies inside it, not covered.
        """
        ...

    async def describe(self, spec: ActionSpec, target: RefInfo | None) -> AuthzResource:
        """What the action touches, for the authz decision."""
        ...

    async def dispatch(self, spec: ActionSpec, timeout_ms: int) -> DispatchResult:
        """Perform one bounded action; never forced past the surface's own checks."""
        ...

    async def settle(self, timeout_ms: int) -> None:
        """Wait, boundedly, for the surface to settle after an action."""
        ...

    async def expectation_holds(self, expect: Expectation, cited_refs: dict[str, RefInfo]) -> tuple[bool, str]:
        """Whether ``expect`` holds now, waiting at most its ``within_ms``; and why not."""
        ...

    async def close(self) -> None: ...
