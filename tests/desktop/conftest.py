"""Desktop fixtures: a real Xvfb with openbox, small Tk applications, and a desktop stack.

One virtual display serves the whole test session; ``$DISPLAY`` points at it so that the
executor process started by ``desktop_stack`` (which inherits the environment) and the
backend opened in this process both drive it. Each test starts its own fixture windows,
with titles of their own, and closes them.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from handrail.executor import DesktopTarget, ExecutorClient, Observation
from handrail.executor.desktop import X11, DesktopSurface, open_desktop
from handrail.scenarios import VirtualDisplay
from handrail.scenarios._tkapps import TkApp
from tests.conftest import Principal, Stack, new_stack

_titles = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    # Until pyproject registers it (--strict-markers rejects unknown marks).
    config.addinivalue_line("markers", "desktop: needs Xvfb, openbox and Tk (a real X display)")


@pytest.fixture(scope="session")
def xdisplay() -> Iterator[str]:
    """A virtual X display with a window manager, named in ``$DISPLAY`` for the session."""
    previous = os.environ.get("DISPLAY")
    with VirtualDisplay() as vd:
        os.environ["DISPLAY"] = vd.display
        try:
            yield vd.display
        finally:
            if previous is None:
                os.environ.pop("DISPLAY", None)
            else:
                os.environ["DISPLAY"] = previous


def unique_title(prefix: str) -> str:
    return f"{prefix} {os.getpid()}-{next(_titles)}"


@pytest.fixture
def notes(xdisplay: str) -> Iterator[TkApp]:
    """A fresh notes window (text box with the focus, coloured buttons, a pad)."""
    with TkApp("notes", xdisplay, title=unique_title("Notes")) as app:
        yield app


@pytest.fixture
def thief(xdisplay: str, notes: TkApp) -> Iterator[TkApp]:
    """Another application, started after ``notes``, which then gets the focus back."""
    with TkApp("thief", xdisplay, title=unique_title("Thief")) as app:
        app.window_id()
        activate(notes)  # a new window takes the focus; give it back
        yield app


def steal_while_typing(notes: TkApp, thief: TkApp, after_chars: int = 12) -> threading.Thread:
    """Have ``thief`` take the focus once ``notes`` holds ``after_chars`` characters: in
    the middle of a long text, however slowly a loaded machine types (a fixed delay
    struck before the first key or after the last one there)."""

    def strike() -> None:
        notes.wait_state(lambda state: len(state["text"]) >= after_chars, timeout=30)
        thief.command("steal")

    watcher = threading.Thread(target=strike, name="thief", daemon=True)
    watcher.start()
    return watcher


def activate(app: TkApp) -> None:
    """Have the window manager activate ``app``'s window (test set-up, not the product)."""
    import time

    x = X11(app.display)
    try:
        wid = app.window_id()
        deadline = time.monotonic() + 5
        asked = 0.0
        while time.monotonic() < deadline:
            if x.active_window() == wid and x.is_inside(x.input_focus(), wid):
                return
            if time.monotonic() - asked > 0.3:  # the window manager may pass over one request
                x.request_activate(wid)
                asked = time.monotonic()
            time.sleep(0.01)
    finally:
        x.close()
    raise RuntimeError(f"could not activate {app.title!r}")


@asynccontextmanager
async def surface(app: TkApp, **kw: object) -> AsyncIterator[DesktopSurface]:
    """A desktop backend bound to ``app``'s window, in this process; activated first."""
    s = await open_desktop(DesktopTarget(display=app.display, window_id=app.window_id()), **kw)  # type: ignore[arg-type]
    try:
        s._x.request_activate(s.window_id)
        for _ in range(100):
            if s._x.active_window() == s.window_id:
                break
            await asyncio.sleep(0.01)
        yield s
    finally:
        await s.close()


_gen = itertools.count(1)


async def observe(s: DesktopSurface, *, screenshot: bool = False, scale: float = 1.0) -> Observation:
    """What the loop would make of a fresh backend observation."""
    from handrail.executor._backend import ObserveOptions

    raw = await s.observe(ObserveOptions(screenshot=screenshot, screenshot_scale=scale))
    gen = next(_gen)
    return Observation(
        observation_id=f"t:{gen}",
        session_id="t",
        generation=gen,
        lease_epoch=1,
        url="",
        title=raw.title,
        snapshot=raw.snapshot,
        digest="",
        taken_at_ms=0,
        screenshot_png=raw.screenshot_png,
        screenshot_scale=raw.screenshot_scale,
        desktop=raw.desktop,
    )


@pytest.fixture(scope="session")
def desktop_stack(xdisplay: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """An authz sidecar and an executor process driving the virtual display."""
    yield from new_stack(tmp_path_factory.mktemp("desktop-stack"))


@dataclass
class DesktopAgent:
    principal: Principal
    target: str
    client: ExecutorClient


@pytest.fixture
def desktop_agent(desktop_stack: Stack) -> Iterator[DesktopAgent]:
    """A new agent with its own desktop target, granted input and submit on it."""
    principal = desktop_stack.add_principal("agent", "desk-agent")
    target = f"desktop:{principal.name}"
    with desktop_stack.operator_client() as ops:
        ops.grant(principal.name, target, ["input", "submit"], [])
    client = ExecutorClient(desktop_stack.executor.address, principal.token)
    try:
        yield DesktopAgent(principal, target, client)
    finally:
        client.close()
