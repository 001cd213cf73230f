"""What a Playwright failure during a dispatch says about the action: sent or not.

The browser backend's one edge where Playwright's errors become dispatch statuses
(``BrowserSurface.dispatch``).
"""

from __future__ import annotations

from playwright.async_api import Error as PlaywrightError

from handrail.executor._backend import DispatchStatus
from handrail.executor._models import ActionKind

__all__ = ["first_line", "refused_before_input", "status_after_error"]


def first_line(exc: PlaywrightError) -> str:
    return exc.message.splitlines()[0] if exc.message else type(exc).__name__


# Errors Playwright raises about the element or the arguments before it sends any input
# (FILL on a button, CHECK on a link, an unknown key): the action is FAILED, not started.
_BEFORE_INPUT = (
    "Element is not an <input>",
    "Element is not a <select>",
    "Not a checkbox or radio button",
    "Cannot type text into input",
    'Input of type "file" cannot be filled',
    "Node is not an HTMLInputElement",
    "Non-multiple file input can only accept single file",
    "Malformed value",
    "Unknown key:",
)


def refused_before_input(exc: PlaywrightError) -> bool:
    first = first_line(exc)
    return "performing" not in (exc.message or "") and any(known in first for known in _BEFORE_INPUT)


def status_after_error(exc: PlaywrightError, kind: ActionKind) -> DispatchStatus:
    """Whether a timed-out action may have reached the page.

    Playwright logs "performing <action> action" once it starts to dispatch input; a
    timeout before that line (element hidden, covered, disabled) means nothing was sent.
    A navigation that timed out may have reached the server; a wait sends nothing.
    """
    if kind is ActionKind.WAIT_FOR:
        return DispatchStatus.NOT_STARTED
    if kind in (ActionKind.NAVIGATE, ActionKind.BACK, ActionKind.TAB_OPEN):
        return DispatchStatus.MAYBE_STARTED
    log = exc.message or ""
    if "performing" in log or "action done" in log:
        return DispatchStatus.MAYBE_STARTED
    return DispatchStatus.NOT_STARTED
