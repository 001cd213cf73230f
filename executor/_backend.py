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

from handrail._rpc import wire_text
from handrail._vocabulary import Reason, Verb
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
class Effect:
    """Something an action does besides acting on its element, judged on its own.

    A click on a link also navigates to its URL; a click, a key or a select that submits a
    form also submits to the form's URL. Each effect is a check of its own with the
    sidecar (all must allow), and the document load it starts is the one the action was
    allowed: it goes through the navigation gate without a second check.
    """

    verb: Verb
    url: str
    why: str  # "link", "form", "form-get", "key", "select" ...
    method: str = "GET"


@dataclass(frozen=True)
class AuthzResource:
    """What the action touches, as the authz sidecar is told.

    ``verb`` is the verb the action is judged as: its kind's, or a stronger one for its
    effect (a key that submits a form is a submit). ``dialog_title``, ``form_name``,
    ``heading``, ``description`` and ``visible_text`` are the element's context, from
    which the sidecar classifies its risk; ``effects`` are further checks (a link's URL, a form's target);
    ``document_load``: the action's own URL is a document the browser will load.
    """

    url: str = ""
    element_role: str = ""
    element_name: str = ""
    window_class: str = ""
    window_title: str = ""
    password_field: bool = False
    verb: Verb | None = None
    dialog_title: str = ""
    form_name: str = ""
    heading: str = ""
    description: str = ""
    visible_text: str = ""
    effects: tuple[Effect, ...] = ()
    document_load: bool = False

    def __post_init__(self) -> None:
        # What a page's script read (the element's context) may hold a lone surrogate or a
        # NUL: the sidecar would refuse the check; as text (see wire_text) it is judged.
        for name in _RESOURCE_TEXTS:
            value = getattr(self, name)
            text = wire_text(value)  # the very object when it is text already
            if text is not value:
                object.__setattr__(self, name, text)


_RESOURCE_TEXTS = (
    "url",
    "element_role",
    "element_name",
    "window_class",
    "window_title",
    "dialog_title",
    "form_name",
    "heading",
    "description",
    "visible_text",
)


@dataclass(frozen=True)
class DocumentLoad:
    """A top-level document a session's browser is about to load, held until judged.

    Attributes:
        url: the URL as the browser parsed it.
        method: the request's method.
        tab_id: the tab it is for (``""`` for a pop-up that has no tab yet).
        cause: ``"redirect"`` (a hop of an HTTP redirect), ``"popup"`` (a new tab's first
            document), ``"request"`` (not a top-level document: a side-effecting request to
            another origin than its tab's page), or ``"page"`` (anything else: the
            action's own load, a link, a form, a script, a refresh, history).
        chain_method: for a redirect, the method of the request that started the chain.
    """

    url: str
    method: str
    tab_id: str
    cause: str
    chain_method: str = ""


@dataclass(frozen=True)
class LoadVerdict:
    """Whether a document may load; a refused one is aborted before it leaves the browser."""

    allow: bool
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class SideRequest:
    """A side-effecting request (not GET, HEAD or OPTIONS) the page is about to send."""

    request_id: str
    method: str
    url: str
    tab_id: str
    resource_type: str  # document (a form post), fetch, xhr, ping (a beacon) ...


class SurfaceListener(Protocol):
    """The loop's side of a surface's network: it judges loads and owns requests.

    A browser backend holds every top-level document load until ``judge_load`` answers,
    and reports every side-effecting request as it starts and as it ends, so that the
    loop can tell which action started it and what became of it.

    A request is *announced* as soon as the page makes it (before its start is reported,
    which may come later: it waits in the browser for the headers to add): one the page
    made during an input is announced before the input's dispatch returns, so that the
    action waits for it even when its start is reported after the action would have ended.
    """

    async def judge_load(self, load: DocumentLoad) -> LoadVerdict:
        """Whether ``load`` may go ahead (a refusal aborts it; the page stays where it was)."""
        ...

    def request_started(self, request: SideRequest) -> dict[str, str]:
        """A side-effecting request starts; answer the headers to add to it."""
        ...

    def request_ended(self, request_id: str, status: int, failure: str) -> None:
        """It ended: with a response (``status``) or without one (``failure``)."""
        ...

    def request_announced(self, key: str, method: str, url: str, made_at: float = 0.0) -> None:
        """The page made a side-effecting request (``key``: the browser's id of it) at
        ``made_at`` (the wall clock, seconds; 0: not said); its start is reported later,
        with the same method and URL."""
        ...

    def announced_dropped(self, key: str) -> None:
        """An announced request failed before its start was reported: it never went out."""
        ...

    def request_refused(self, request: SideRequest) -> None:
        """The gate refused ``request`` (``judge_load`` said no): it never went out, and its
        announcement, before or after this, is no request to wait for."""
        ...

    def worker_made(self, prefix: str, tab_id: str) -> None:
        """The running action's input made a dedicated worker of the tab, whose requests'
        keys begin with ``prefix``: what it sends while no action runs is that action's."""
        ...

    def frame_sent(self, socket: str, url: str, tab_id: str) -> None:
        """The page sent a message on the WebSocket ``socket`` (the browser's id of it,
        with the key prefix of its worker or frame) to ``url``."""
        ...

    def frame_received(self, socket: str) -> None:
        """A message came in on ``socket``: what was sent on it before is answered."""
        ...

    def socket_closed(self, socket: str, failure: str) -> None:
        """``socket`` closed or failed (``failure`` says how): what was sent on it and not
        answered may have been taken with no word of it."""
        ...


class OpenListener:
    """A listener that lets every load through and keeps no record: for tools and tests
    that drive a browser surface without the guarded loop (never the executor's)."""

    async def judge_load(self, load: DocumentLoad) -> LoadVerdict:
        return LoadVerdict(True)

    def request_started(self, request: SideRequest) -> dict[str, str]:
        return {}

    def request_ended(self, request_id: str, status: int, failure: str) -> None:
        return None

    def request_announced(self, key: str, method: str, url: str, made_at: float = 0.0) -> None:
        return None

    def announced_dropped(self, key: str) -> None:
        return None

    def request_refused(self, request: SideRequest) -> None:
        return None

    def worker_made(self, prefix: str, tab_id: str) -> None:
        return None

    def frame_sent(self, socket: str, url: str, tab_id: str) -> None:
        return None

    def frame_received(self, socket: str) -> None:
        return None

    def socket_closed(self, socket: str, failure: str) -> None:
        return None


#: The listener of a surface opened without the loop (see ``BrowserHost.open_page``).
OPEN_LISTENER = OpenListener()


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

    async def release(self) -> None:
        """Undo what a passed ``check_fresh`` left in place for the dispatch that did not come.

        A browser arms the page's input guard on the element in the same round trip as
        its check; an action refused after the check (by the sidecar, the fence) must not
        leave it armed. A no-op once ``dispatch`` has run, or where nothing is armed.
        """
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

    def listen(self, listener: SurfaceListener) -> None:
        """Report document loads and side-effecting requests to ``listener`` from now on.

        A surface without a network (a desktop) ignores it.
        """
        ...

    async def start(self, url: str, timeout_ms: int) -> None:
        """Load the session's start page (judged by the listener like any other load)."""
        ...

    async def close(self) -> None: ...
