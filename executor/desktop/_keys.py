"""Keys and characters as the X server knows them: keysyms, keycodes, modifiers.

``Keyboard`` turns what an action names (a character of text, a key such as ``enter`` or
``F5``, a modifier such as ``ctrl``) into the XTest key events that type it, on the
connection that checks before it sends. ``pyautogui.write`` silently drops characters the
keymap lacks; here a character the keymap lacks is given a spare keycode (one with no
keysyms) for the duration of the text, so ``héllo ü€ 中`` arrives intact. Key events are
routed by the server in order with the mapping change, so the client reads each key with
the mapping in force when it was sent.

Key names are pyautogui's (``enter``, ``esc``, ``pgdn``, ``win``, ``f5`` ...), any X keysym
name (``BackSpace``, ``KP_Enter``), or a single character.
"""

from __future__ import annotations

from dataclasses import dataclass

from Xlib import XK, X
from Xlib.ext import xtest

from handrail.executor._errors import BackendError
from handrail.executor.desktop._x11 import X11

# Characters typed as named keys rather than by their code point.
_CONTROL_KEYSYMS = {"\n": XK.XK_Return, "\r": XK.XK_Return, "\t": XK.XK_Tab}

# pyautogui's key names (its X11 table) -> X keysym names.
_KEY_NAMES = {
    "backspace": "BackSpace",
    "tab": "Tab",
    "enter": "Return",
    "return": "Return",
    "shift": "Shift_L",
    "ctrl": "Control_L",
    "alt": "Alt_L",
    "pause": "Pause",
    "capslock": "Caps_Lock",
    "esc": "Escape",
    "escape": "Escape",
    "pgup": "Page_Up",
    "pgdn": "Page_Down",
    "pageup": "Page_Up",
    "pagedown": "Page_Down",
    "end": "End",
    "home": "Home",
    "left": "Left",
    "up": "Up",
    "right": "Right",
    "down": "Down",
    "select": "Select",
    "print": "Print",
    "execute": "Execute",
    "prtsc": "Print",
    "prtscr": "Print",
    "prntscrn": "Print",
    "printscreen": "Print",
    "insert": "Insert",
    "del": "Delete",
    "delete": "Delete",
    "help": "Help",
    "win": "Super_L",
    "winleft": "Super_L",
    "winright": "Super_R",
    "apps": "Menu",
    "multiply": "KP_Multiply",
    "add": "KP_Add",
    "separator": "KP_Separator",
    "subtract": "KP_Subtract",
    "decimal": "KP_Decimal",
    "divide": "KP_Divide",
    "numlock": "Num_Lock",
    "scrolllock": "Scroll_Lock",
    "shiftleft": "Shift_L",
    "shiftright": "Shift_R",
    "ctrlleft": "Control_L",
    "ctrlright": "Control_R",
    "altleft": "Alt_L",
    "altright": "Alt_R",
    "space": "space",
    **{f"num{i}": f"KP_{i}" for i in range(10)},
    **{f"f{i}": f"F{i}" for i in range(1, 25)},
}
_ALIASES = {
    "control": "ctrl",
    "meta": "win",
    "super": "win",
    "arrowleft": "left",
    "arrowright": "right",
    "arrowup": "up",
    "arrowdown": "down",
}


def keysym_for(ch: str) -> int:
    """The keysym of a character: Latin-1 directly, anything else as a Unicode keysym."""
    special = _CONTROL_KEYSYMS.get(ch)
    if special is not None:
        return int(special)
    o = ord(ch)
    if 0x20 <= o <= 0x7E or 0xA0 <= o <= 0xFF:
        return o
    return 0x01000000 | o


def untypable(text: str) -> str:
    """The first character of ``text`` that cannot be typed (a control character), or ""."""
    for ch in text:
        if ch not in _CONTROL_KEYSYMS and (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0):
            return ch
    return ""


def key_keysym(key: str) -> int:
    """The keysym of a named key (pyautogui's names, X keysym names) or one character; 0 if unknown."""
    if len(key) == 1:
        return keysym_for(key)
    low = key.strip().lower()
    name = _KEY_NAMES.get(_ALIASES.get(low, low))
    if name is not None:
        return int(XK.string_to_keysym(name))
    return int(XK.string_to_keysym(key.strip()))  # "BackSpace", "KP_Enter": X's own names


@dataclass(frozen=True)
class KeyStroke:
    """One key event to send: press or release of a keycode, with the modifier state it meets."""

    press: bool
    keycode: int
    state: int  # the modifier state in force when the event is processed (for the grab probe)


class Keyboard:
    """Key events through XTest, borrowing spare keycodes for what the keymap lacks.

    Use ``prepare(keysyms)`` before sending a group of keys (it may change the keyboard
    mapping, outside any server grab), ``strokes_for_char`` / ``strokes_for_keys`` to plan
    the events, ``send`` to send them (inside the caller's server grab), and ``restore()``
    at the end to give the spare keycodes back.
    """

    def __init__(self, x: X11) -> None:
        self._x = x
        info = x.display.display.info
        self._min = int(info.min_keycode)
        self._count = int(info.max_keycode) - self._min + 1
        self._shift = int(x.display.keysym_to_keycode(XK.XK_Shift_L))
        self._codes: dict[int, tuple[int, bool]] = {}  # keysym -> (keycode, needs shift)
        self._borrowed: dict[int, int] = {}  # keycode -> keysym mapped onto it
        self._spare: list[int] = []
        self._width = 1
        self._modifiers: dict[int, int] = {}  # keycode -> the modifier mask it sets

    def _read_keymap(self) -> None:
        mapping = self._x.display.get_keyboard_mapping(self._min, self._count)
        self._width = len(mapping[0]) if mapping else 1
        self._codes = {}
        self._spare = []
        for i, syms in enumerate(mapping):
            code = self._min + i
            if code in self._borrowed:
                continue
            if not any(syms):
                self._spare.append(code)
                continue
            for level in (1, 0):  # the unshifted level wins when both have the keysym
                if level < len(syms) and syms[level]:
                    keysym, shifted = int(syms[level]), level == 1
                    known = self._codes.get(keysym)
                    # The first keycode with a keysym is its own (Xvfb also puts Alt_L on a
                    # keycode that sets no modifier); an unshifted one beats a shifted one.
                    if known is None or (known[1] and not shifted):
                        self._codes[keysym] = (code, shifted)
        self._modifiers = {}
        for bit, codes in enumerate(self._x.display.get_modifier_mapping()):
            for code in codes:
                if code:
                    self._modifiers[int(code)] = 1 << bit

    @property
    def spare_count(self) -> int:
        if not self._codes:
            self._read_keymap()
        return len(self._spare) + len(self._borrowed)

    def missing(self, chars: set[str]) -> set[str]:
        """The characters of ``chars`` the current keymap cannot type."""
        if not self._codes:
            self._read_keymap()
        return {ch for ch in chars if keysym_for(ch) not in self._codes}

    def has_keysym(self, keysym: int) -> bool:
        if not self._codes:
            self._read_keymap()
        return keysym in self._codes

    def prepare(self, keysyms: set[int]) -> None:
        """Make every keysym of ``keysyms`` typable, mapping spare keycodes as needed.

        Raises:
            BackendError: more distinct missing keysyms than spare keycodes.
        """
        self._read_keymap()
        needed = sorted(ks for ks in keysyms if ks not in self._codes and ks not in self._borrowed.values())
        free = [code for code in self._spare if code not in self._borrowed]
        if len(needed) > len(free):
            raise BackendError(f"{len(needed)} characters need spare keycodes; the keymap has {len(free)}")
        for keysym, code in zip(needed, free, strict=False):
            self._x.display.change_keyboard_mapping(code, [[keysym] * self._width])
            self._borrowed[code] = keysym
        for code, keysym in self._borrowed.items():
            self._codes[keysym] = (code, False)
        self._x.display.sync()

    def strokes_for_char(self, ch: str, base_state: int) -> list[KeyStroke]:
        """The events that type one prepared character (shift around it when it needs it)."""
        code, shift = self._codes[keysym_for(ch)]
        if not shift:
            return [KeyStroke(True, code, base_state), KeyStroke(False, code, base_state)]
        shifted = base_state | X.ShiftMask
        return [
            KeyStroke(True, self._shift, base_state),
            KeyStroke(True, code, shifted),
            KeyStroke(False, code, shifted),
            KeyStroke(False, self._shift, shifted),
        ]

    def strokes_for_keys(self, keysyms: list[int], base_state: int) -> list[KeyStroke]:
        """Press prepared keys in order (a chord: ``ctrl``, ``a``), then release them in reverse."""
        presses: list[KeyStroke] = []
        state = base_state
        for keysym in keysyms:
            code, shift = self._codes[keysym]
            if shift and len(keysyms) == 1:
                return self._shifted(code, base_state)
            presses.append(KeyStroke(True, code, state))
            state |= self._modifiers.get(code, 0)
        releases = []
        for stroke in reversed(presses):
            releases.append(KeyStroke(False, stroke.keycode, state))
            state &= ~self._modifiers.get(stroke.keycode, 0)
        return presses + releases

    def _shifted(self, code: int, base_state: int) -> list[KeyStroke]:
        shifted = base_state | X.ShiftMask
        return [
            KeyStroke(True, self._shift, base_state),
            KeyStroke(True, code, shifted),
            KeyStroke(False, code, shifted),
            KeyStroke(False, self._shift, shifted),
        ]

    def send(self, strokes: list[KeyStroke]) -> None:
        """Send the events through XTest on the keyboard's connection (not flushed)."""
        d = self._x.display
        for stroke in strokes:
            xtest.fake_input(d, X.KeyPress if stroke.press else X.KeyRelease, stroke.keycode)

    @property
    def borrowed(self) -> int:
        return len(self._borrowed)

    def restore(self) -> None:
        """Give every borrowed keycode back its empty mapping."""
        if not self._borrowed:
            return
        for code in self._borrowed:
            self._x.display.change_keyboard_mapping(code, [[0] * self._width])
        self._borrowed.clear()
        self._codes = {}
        self._x.display.sync()
