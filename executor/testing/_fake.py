"""A scripted backend: the guarded loop driven without a browser or an X display.

As httpx's ``MockTransport`` stands behind ``BaseTransport``, ``FakeBackend`` stands
behind the executor's ``Backend`` protocol (``handrail.executor._backend``). It shows a
fixed page (or window) that a test may change between observations, answers each check
and each dispatch as scripted — in order, then "unchanged" and "done" — and keeps a
record of what the loop asked of it. Everything above the seam is the real executor:
sessions, leases and fences, the authz sidecar, the ledger.

    backend = FakeBackend()
    backend.refuse_next_check(Reason.STALE_REF, "the button was re-rendered")
    backend.script(Dispatch.maybe_started("the connection dropped after the POST"))
    core = GuardedExecutor(authz, ledger, backend.open)
    ...
    assert [spec.idempotency_key for spec in backend.dispatched] == ["k1"]

``FaultHooks`` runs a test's callbacks at the points of an action's life where the
executor's ``--fault`` would kill it (``before-intent``, ``after-intent``,
``after-dispatch``, ``after-result``): a takeover between the decision and the dispatch,
or a simulated crash.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from handrail._vocabulary import ActionKind, Reason
from handrail.executor._ariatree import parse_snapshot
from handrail.executor._backend import (
    AuthzResource,
    Backend,
    DispatchResult,
    DispatchStatus,
    ObserveOptions,
    RawObservation,
    Refusal,
    SurfaceListener,
)
from handrail.executor._faults import POINTS
from handrail.executor._models import ActionSpec, DesktopState, Expectation, Observation, WindowInfo
from handrail.executor._snapshot import RefInfo

#: The page a ``FakeBackend`` shows unless told otherwise.
DEFAULT_SNAPSHOT = """- main [ref=e1]:
  - heading "Basket" [level=1] [ref=e2]
  - textbox "Name" [ref=e3]
  - button "Pay" [ref=e4]
  - button "Cancel order" [ref=e5]"""

_WINDOW = WindowInfo(window_id=0x400001, pid=4242, wm_class="Notes", title="Notes", x=0, y=0, width=640, height=480)


@dataclass(frozen=True)
class Dispatch:
    """How one scripted dispatch ends: its result, an error it raises, after a delay."""

    result: DispatchResult = field(default_factory=lambda: DispatchResult(DispatchStatus.DONE))
    error: BaseException | None = None
    delay_s: float = 0.0

    @classmethod
    def done(cls, message: str = "", *, typed_chars: int = 0, via: str = "") -> Dispatch:
        """The action went out and the surface took it."""
        return cls(DispatchResult(DispatchStatus.DONE, message, typed_chars=typed_chars, via=via))

    @classmethod
    def not_started(cls, message: str = "not sent", reason: Reason | None = None) -> Dispatch:
        """Known not to have reached the surface (a check at dispatch time stopped it)."""
        return cls(DispatchResult(DispatchStatus.NOT_STARTED, message, reason=reason))

    @classmethod
    def maybe_started(cls, message: str = "the connection dropped") -> Dispatch:
        """The surface may have received it: the outcome is unknown."""
        return cls(DispatchResult(DispatchStatus.MAYBE_STARTED, message))

    @classmethod
    def partial(cls, message: str, typed_chars: int, reason: Reason | None = None) -> Dispatch:
        """Known to have partly happened (typing cut short after ``typed_chars``)."""
        return cls(DispatchResult(DispatchStatus.PARTIAL, message, typed_chars=typed_chars, reason=reason))

    @classmethod
    def raises(cls, error: BaseException) -> Dispatch:
        """The backend fails mid-action with ``error``."""
        return cls(error=error)

    @classmethod
    def slow(cls, seconds: float, then: Dispatch | None = None) -> Dispatch:
        """``then`` (default: done), after ``seconds``."""
        step = then or cls.done()
        return cls(step.result, step.error, seconds)


class FakeBackend:
    """A scripted surface behind the ``Backend`` protocol.

    Args:
        kind: ``"browser"`` or ``"desktop"`` (a desktop observation carries a window).
        url: the page's URL (what authz is told an action touches).
        title: the page's (or window's) title.
        snapshot: the ARIA snapshot observations show (Playwright's ai-mode YAML); the
            element list refs are resolved from is parsed from it, as the browser
            backend parses its own.

    Attributes:
        url, title, snapshot: what the next observation shows; a test may change them.
        observations: how many observations were taken.
        checks: the actions ``check_fresh`` was asked about, in order.
        dispatched: the actions that reached ``dispatch``, in order (waits included).
        calls: the protocol methods called, in order (``"observe"``, ``"check"`` ...).
        closed: whether the loop closed the surface.
        on_dispatch: awaited with each action as it reaches ``dispatch``, before the
            scripted answer (to look at the world at that moment).
        listener: the loop's listener (``listen``): a test plays the page's document
            loads and side-effecting requests through it.
        started: the start pages the loop loaded.
        observe_error: raised by every observation while set (a target gone for good).
    """

    def __init__(
        self,
        kind: str = "browser",
        *,
        url: str = "https://shop.example/basket",
        title: str = "Basket",
        snapshot: str = DEFAULT_SNAPSHOT,
    ) -> None:
        self.kind = kind
        self.url = url
        self.title = title
        self.snapshot = snapshot
        self.observations = 0
        self.checks: list[ActionSpec] = []
        self.dispatched: list[ActionSpec] = []
        self.calls: list[str] = []
        self.closed = False
        self.on_dispatch: Callable[[ActionSpec], Awaitable[None]] | None = None
        self.listener: SurfaceListener | None = None
        self.started: list[str] = []
        self.observe_error: BaseException | None = None
        self._refusals: deque[Refusal | None] = deque()
        self._dispatches: deque[Dispatch] = deque()
        self._expectations: deque[tuple[bool, str]] = deque()

    async def open(self, spec: object) -> Backend:
        """A backend factory for ``GuardedExecutor``: every session gets this surface."""
        return self

    # -- scripting -----------------------------------------------------------------------------

    def refuse_next_check(self, reason: Reason, message: str = "") -> None:
        """The next ``check_fresh`` (after any scripted before it) refuses with ``reason``."""
        self._refusals.append(Refusal(reason, message or f"scripted {reason.value}"))

    def pass_next_check(self) -> None:
        """The next ``check_fresh`` passes (to order a refusal after it)."""
        self._refusals.append(None)

    def script(self, *steps: Dispatch) -> None:
        """How the next dispatches end, in order; after them, each one is done."""
        self._dispatches.extend(steps)

    def expect_next(self, holds: bool, why: str = "") -> None:
        """Whether the next expectation holds (by default every expectation holds)."""
        self._expectations.append((holds, why))

    # -- the Backend protocol ------------------------------------------------------------------

    async def observe(self, options: ObserveOptions) -> RawObservation:
        self.calls.append("observe")
        if self.observe_error is not None:
            raise self.observe_error
        self.observations += 1
        desktop = None
        if self.kind == "desktop":
            window = WindowInfo(
                _WINDOW.window_id, _WINDOW.pid, _WINDOW.wm_class, self.title, 0, 0, _WINDOW.width, _WINDOW.height
            )
            desktop = DesktopState(1280, 800, window, window, (window,), screenshot_of_target=True)
        browser = self.kind == "browser"
        return RawObservation(
            url=self.url if browser else "",
            title=self.title,
            snapshot=self.snapshot,
            active_tab="t1" if browser else "",
            desktop=desktop,
            elements=parse_snapshot(self.snapshot, tab="t1") if browser else (),
        )

    async def check_fresh(self, cited: Observation, spec: ActionSpec, target: RefInfo | None) -> Refusal | None:
        self.calls.append("check")
        self.checks.append(spec)
        return self._refusals.popleft() if self._refusals else None

    async def describe(self, spec: ActionSpec, target: RefInfo | None) -> AuthzResource:
        self.calls.append("describe")
        if self.kind == "desktop":
            return AuthzResource(window_class=_WINDOW.wm_class, window_title=self.title)
        url = spec.url if spec.kind in (ActionKind.NAVIGATE, ActionKind.TAB_OPEN) else self.url
        return AuthzResource(
            url=url,
            element_role=target.role if target else "",
            element_name=target.name if target else "",
        )

    async def dispatch(self, spec: ActionSpec, timeout_ms: int) -> DispatchResult:
        self.calls.append("dispatch")
        self.dispatched.append(spec)
        if self.on_dispatch is not None:
            await self.on_dispatch(spec)
        step = self._dispatches.popleft() if self._dispatches else Dispatch.done()
        if step.delay_s:
            await asyncio.sleep(step.delay_s)
        if step.error is not None:
            raise step.error
        return step.result

    async def settle(self, timeout_ms: int) -> None:
        self.calls.append("settle")

    async def release(self) -> None:
        return None  # nothing is armed by a check here

    async def expectation_holds(self, expect: Expectation, cited_refs: dict[str, RefInfo]) -> tuple[bool, str]:
        self.calls.append("expect")
        return self._expectations.popleft() if self._expectations else (True, "")

    def listen(self, listener: SurfaceListener) -> None:
        """Keep the loop's listener: a test plays the page's network through it
        (``await backend.listener.judge_load(...)``, ``request_started``, ``request_ended``)."""
        self.listener = listener

    async def start(self, url: str, timeout_ms: int) -> None:
        self.calls.append("start")
        self.started.append(url)
        self.url = url

    async def close(self) -> None:
        self.calls.append("close")
        self.closed = True


Hook = Callable[[str], Awaitable[None]]


class FaultHooks:
    """Runs callbacks at points of an action's life, in place of the executor's ``--fault``.

    A callback gets the action's idempotency key; it may act on the world (take the
    lease over), wait, or raise to stop the executor there as a crash would.
    """

    def __init__(self) -> None:
        self._hooks: dict[str, list[tuple[str, Hook]]] = {}

    def at(self, point: str, hook: Hook, *, key: str = "") -> None:
        """Call ``hook`` at ``point`` (one of ``before-intent``, ``after-intent``,
        ``after-dispatch``, ``after-result``), for the action keyed ``key`` or any."""
        if point not in POINTS:
            raise ValueError(f"{point!r} is not one of {', '.join(POINTS)}")
        self._hooks.setdefault(point, []).append((key, hook))

    async def hit(self, point: str, idempotency_key: str) -> None:
        for key, hook in self._hooks.get(point, []):
            if not key or key == idempotency_key:
                await hook(idempotency_key)
