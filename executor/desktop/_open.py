"""Opening a desktop session: binding it to exactly one managed window of a display."""

from __future__ import annotations

import logging
import os

from Xlib import error as xerror

from handrail._patterns import PatternError, compile_regex
from handrail.executor._backend import HumanActivityCallback
from handrail.executor._errors import BackendError
from handrail.executor._models import DesktopTarget
from handrail.executor.desktop._binding import Binding
from handrail.executor.desktop._surface import DesktopSurface
from handrail.executor.desktop._x11 import X11, WindowGoneError
from handrail.executor.desktop._xinput import own_clients

log = logging.getLogger(__name__)


def bind_window(x: X11, target: DesktopTarget) -> int:
    """The one managed window every given selector of ``target`` matches.

    Raises:
        BackendError: no window or several match; the message lists the candidates.
    """
    candidates = x.stacking()
    if not candidates:
        raise BackendError(f"display {x.name} has no managed windows")
    wanted = []
    if target.window_id:
        wanted.append(f"window id 0x{target.window_id:x}")
    if target.pid:
        wanted.append(f"pid {target.pid}")
    if target.wm_class:
        wanted.append(f"WM_CLASS {target.wm_class!r}")
    if target.title_pattern:
        wanted.append(f"title /{target.title_pattern}/")
    try:
        pattern = compile_regex(target.title_pattern) if target.title_pattern else None
    except PatternError as exc:
        raise BackendError(f"title_pattern is not a regular expression: {exc}") from exc
    matches = []
    for wid in candidates:
        try:
            if target.window_id and wid != target.window_id:
                continue
            if target.pid and x.pid(wid) != target.pid:
                continue
            if target.wm_class and target.wm_class.lower() not in {c.lower() for c in x.wm_class(wid)}:
                continue
            if pattern is not None and not pattern.search(x.title(wid)):
                continue
        except WindowGoneError:
            continue
        matches.append(wid)
    if len(matches) == 1:
        return matches[0]
    listed = "; ".join(x.describe(w) for w in (matches or candidates))
    if not matches:
        raise BackendError(f"no window on {x.name} matches {' and '.join(wanted)}; windows: {listed}")
    raise BackendError(f"{len(matches)} windows on {x.name} match {' and '.join(wanted)}: {listed}; narrow it down")


async def open_desktop(
    target: DesktopTarget,
    on_human_activity: HumanActivityCallback | None = None,
) -> DesktopSurface:
    """Open a desktop surface bound to ``target``'s window.

    Args:
        target: the display (default ``$DISPLAY``) and the selectors of the window.
        on_human_activity: awaited with a description whenever input the executor did not
            send is seen on the display while the session is open.

    Raises:
        BackendError: no display, no EWMH window manager, or not exactly one matching window.
    """
    display = target.display or os.environ.get("DISPLAY", "")
    if not display:
        raise BackendError("no X display: set $DISPLAY for the executor or name desktop.display")
    x = X11(display)
    try:
        if not x.wm_name():
            raise BackendError(
                f"display {display} has no EWMH window manager (no _NET_SUPPORTING_WM_CHECK); "
                "the focus check needs _NET_ACTIVE_WINDOW: start one, e.g. openbox"
            )
        binding = Binding(x, bind_window(x, target))
        binding.start(lambda: bind_window(x, target))  # again, under a server grab, then watched
        own_clients.setdefault(display, set()).add(x.client_id_base)
        surface = DesktopSurface(x, binding, on_human_activity=on_human_activity)
    except BaseException:
        x.close()
        raise
    try:
        surface.start_watching()
    except (RuntimeError, xerror.XError, xerror.DisplayError) as exc:
        log.warning("cannot watch for foreign input on %s: %s", display, exc)
    return surface
