"""pyautogui, bound to the one display this process drives, and where its input left the pointer.

pyautogui opens its X connection at import, so it is imported once, for one display
(``PAUSE = 0``; its fail-safe is off because the backend bounds every point to the
target's client area itself, and a person taking the mouse is caught as foreign input).
Its own X client is registered with ``_xinput.own_clients`` so that its XTEST input is
not taken for a person's.
"""

from __future__ import annotations

import importlib
import os
import warnings
from typing import Any

from handrail.executor._errors import BackendError
from handrail.executor.desktop._xinput import own_clients

_KEY_ALIASES = {
    "control": "ctrl",
    "escape": "esc",
    "meta": "win",
    "super": "win",
    "arrowleft": "left",
    "arrowright": "right",
    "arrowup": "up",
    "arrowdown": "down",
    "return": "enter",
}

# display -> the root point where this process's input last left the pointer
pointer_left: dict[str, tuple[int, int]] = {}
_pyautogui: Any = None
_pyautogui_display = ""


def load_pyautogui(display: str) -> Any:
    """Import pyautogui bound to ``display`` (it opens its X connection at import)."""
    global _pyautogui, _pyautogui_display
    if _pyautogui is not None:
        if display != _pyautogui_display:
            raise BackendError(
                f"this executor drives display {_pyautogui_display}; pyautogui cannot also drive {display} "
                "(run one executor per display)"
            )
        return _pyautogui
    previous = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = display  # pyautogui opens $DISPLAY at import
    with warnings.catch_warnings():
        # pyscreeze leaves the pipes of its `which scrot` probes open at import.
        warnings.simplefilter("ignore", ResourceWarning)
        import pyautogui
        import pyscreeze

        proc = getattr(pyscreeze, "whichProc", None)
        for pipe in (getattr(proc, "stdout", None), getattr(proc, "stderr", None)):
            if pipe is not None:
                pipe.close()
    if previous is None:
        del os.environ["DISPLAY"]
    else:
        os.environ["DISPLAY"] = previous
    pyautogui.PAUSE = 0
    pyautogui.FAILSAFE = False
    pyautogui.MINIMUM_DURATION = 0
    x11 = importlib.import_module("pyautogui._pyautogui_x11")  # its X connection and key table
    own_clients.setdefault(display, set()).add(int(x11._display.display.info.resource_id_base))
    _pyautogui, _pyautogui_display = pyautogui, display
    return pyautogui


def key_name(key: str) -> str:
    low = key.strip().lower()
    return _KEY_ALIASES.get(low, low)


def gui_keymap() -> dict[str, Any]:
    """pyautogui's table of the key names it knows (its X backend's ``keyboardMapping``)."""
    mapping: dict[str, Any] = importlib.import_module("pyautogui._pyautogui_x11").keyboardMapping
    return mapping
