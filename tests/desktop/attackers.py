"""Hostile X clients, each its own process with its own X connection, for the desktop guard.

Run as ``python tests/desktop/attackers.py KIND [options]`` (``Attacker`` does it); each
prints ``ready 0x<window>`` once it is set up, counts every key and button event its
windows receive (its own event log), and on ``quit`` on stdin (or end of stdin) prints one
JSON line — ``{"keys": n, "buttons": n, "text": "...", ...}`` — and exits. Kinds:

- ``grab-keyboard`` / ``grab-pointer``: an active grab of the keyboard / pointer, held;
- ``passive-key`` / ``passive-button``: a passive grab of every key / button (any
  modifiers) on the root window, as a global-shortcut daemon might;
- ``child --parent WID --geometry X,Y,W,H [--input-only] [--focus]``: a window of its own
  *inside another client's window*; input-only windows are invisible and take clicks (and
  keys when the pointer is over them); ``--focus`` gives it the keyboard focus;
- ``blink --geometry X,Y,W,H [--period-ms P]``: an override-redirect overlay mapped and
  unmapped in a loop, hidden a fifth of each period;
- ``reuse --window WID --title T``: waits until the server hands it the id range of WID's
  (dead) client, creates a window with that very id, titled T, and has it activated;
- ``impostor --title T``: a new window titled T that has itself activated;
- ``mover --window WID --dx N --geometry X,Y,W,H``: moves WID's window back and forth by N
  pixels through the window manager, over a decoy window (the geometry) at the bottom of
  the stack that logs the clicks that miss;
- ``dialog-app --title T [--trigger CH] [--no-ping]``: an *application* (the target, not
  an attacker) whose dialog takes its keys the moment it opens, before the X focus moves,
  as toolkits do: on CH typed, on ``dialog`` on stdin, or ``dialog-in MS`` later. It
  answers ``_NET_WM_PING`` unless told not to. Its summary says what the main window and the dialog received.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from Xlib import X, Xatom
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.protocol import event, request

HERE = Path(__file__).resolve()


# -- the clients (each in its own process) ------------------------------------------------


def _geometry(text: str) -> tuple[int, int, int, int]:
    x, y, w, h = (int(v) for v in text.split(","))
    return x, y, w, h


class _Client:  # pragma: no cover - runs in the attacker's process
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.d = Display(os.environ["DISPLAY"])
        self.root = self.d.screen().root
        self.keys = 0
        self.buttons = 0
        self.text = ""
        self.extra: dict[str, Any] = {}
        self.windows: list[Any] = []

    def atom(self, name: str) -> int:
        return int(self.d.intern_atom(name))

    def window(self, x: int, y: int, w: int, h: int, *, parent: Any = None, input_only: bool = False, **kw: Any) -> Any:
        kw.setdefault("event_mask", X.KeyPressMask | X.ButtonPressMask | X.StructureNotifyMask)
        if input_only:
            win = (parent or self.root).create_window(x, y, w, h, 0, 0, X.InputOnly, X.CopyFromParent, **kw)
        else:
            if "background_pixmap" not in kw:
                kw.setdefault("background_pixel", self.d.screen().black_pixel)
            depth = self.d.screen().root_depth
            win = (parent or self.root).create_window(x, y, w, h, 0, depth, X.InputOutput, X.CopyFromParent, **kw)
        self.windows.append(win)
        return win

    def name(self, win: Any, title: str) -> None:
        win.set_wm_name(title)
        win.change_property(self.atom("_NET_WM_NAME"), self.atom("UTF8_STRING"), 8, title.encode())
        win.set_wm_class("handrailattacker", "Handrailattacker")
        win.change_property(self.atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [os.getpid()])

    def activate(self, win: Any) -> None:
        message = event.ClientMessage(
            window=win, client_type=self.atom("_NET_ACTIVE_WINDOW"), data=(32, [2, X.CurrentTime, 0, 0, 0])
        )
        self.root.send_event(message, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
        self.d.flush()

    def wait_mapped(self, win: Any, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if win.get_attributes().map_state == X.IsViewable:
                return
            time.sleep(0.01)

    def event(self, e: Any) -> None:
        if e.type == X.KeyPress:
            self.keys += 1
            self.text += self.char(e)
        elif e.type == X.ButtonPress:
            self.buttons += 1

    def char(self, e: Any) -> str:
        keysym = self.d.keycode_to_keysym(e.detail, 1 if e.state & X.ShiftMask else 0)
        if keysym == 0xFF0D:
            return "\n"
        if 0x20 <= keysym < 0x100:
            return chr(keysym)
        if keysym & 0xFF000000 == 0x01000000:
            return chr(keysym & 0xFFFFFF)
        return ""

    def tick(self) -> float | None:
        """Periodic work; returns the seconds until the next tick (None: no ticks)."""
        return None

    def command(self, line: str) -> None:
        pass

    def run(self, ready: int) -> None:
        self.d.sync()
        print(f"ready 0x{ready:x}", flush=True)
        fd = self.d.fileno()
        stdin = sys.stdin.fileno()
        next_tick = time.monotonic()
        while True:
            while self.d.pending_events():
                e = self.d.next_event()
                if e.type == X.MappingNotify:
                    self.d.refresh_keyboard_mapping(e)
                self.event(e)
            if time.monotonic() >= next_tick:
                interval = self.tick()
                next_tick = time.monotonic() + interval if interval is not None else float("inf")
            wait = None if next_tick == float("inf") else max(0.0, next_tick - time.monotonic())
            readable, _, _ = select.select([fd, stdin], [], [], wait)
            if stdin in readable:
                line = sys.stdin.readline()
                if not line or line.strip() == "quit":
                    break
                self.command(line.strip())
                print(f"ack {line.strip()}", flush=True)
        self.d.sync()
        while self.d.pending_events():
            self.event(self.d.next_event())
        print(json.dumps({"keys": self.keys, "buttons": self.buttons, "text": self.text, **self.extra}), flush=True)


class _Grab(_Client):  # pragma: no cover
    def start(self) -> int:
        win = self.window(0, 0, 1, 1, override_redirect=True)
        win.map()
        self.wait_mapped(win)
        if self.args.kind == "grab-keyboard":
            status = win.grab_keyboard(False, X.GrabModeAsync, X.GrabModeAsync, X.CurrentTime)
        else:
            status = win.grab_pointer(False, X.ButtonPressMask, X.GrabModeAsync, X.GrabModeAsync, 0, 0, X.CurrentTime)
        if status != X.GrabSuccess:
            raise SystemExit(f"{self.args.kind}: grab failed with {status}")
        return int(win.id)


class _Passive(_Client):  # pragma: no cover
    def start(self) -> int:
        # One grab per key (or button) and modifier state, so that the window manager's own
        # bindings on the root (alt+F4 ...) make only their own combinations fail.
        info = self.d.display.info
        details = range(info.min_keycode, info.max_keycode + 1) if self.args.kind == "passive-key" else range(1, 6)
        caught = []
        for detail in details:
            for state in (0, X.ShiftMask):
                error = xerror.CatchError(xerror.BadAccess)
                if self.args.kind == "passive-key":
                    self.root.grab_key(detail, state, False, X.GrabModeAsync, X.GrabModeAsync, onerror=error)
                else:
                    mask = X.ButtonPressMask
                    self.root.grab_button(
                        detail, state, False, mask, X.GrabModeAsync, X.GrabModeAsync, 0, 0, onerror=error
                    )
                caught.append(error)
        self.d.sync()
        self.extra["grabs"] = sum(1 for e in caught if e.get_error() is None)
        return int(self.root.id)


class _Child(_Client):  # pragma: no cover
    def start(self) -> int:
        parent = self.d.create_resource_object("window", int(self.args.parent, 0))
        x, y, w, h = _geometry(self.args.geometry)
        if self.args.input_only:
            win = self.window(x, y, w, h, parent=parent, input_only=True)
        else:
            win = self.window(x, y, w, h, parent=parent, background_pixmap=X.ParentRelative)
        win.map()
        self.wait_mapped(win)
        if self.args.focus:
            win.set_input_focus(X.RevertToParent, X.CurrentTime)
        return int(win.id)


class _Blink(_Client):  # pragma: no cover
    def start(self) -> int:
        x, y, w, h = _geometry(self.args.geometry)
        self.win = self.window(x, y, w, h, override_redirect=True)
        self.shown = False
        self.extra["blinks"] = 0
        return int(self.win.id)

    def tick(self) -> float:
        if self.shown:
            self.win.unmap()
        else:
            self.win.map()
            self.extra["blinks"] += 1
        self.shown = not self.shown
        self.d.flush()
        # Shown most of the time, hidden only briefly: a check that passes in a gap is
        # followed by the overlay within a fraction of a millisecond.
        return self.args.period_ms * (0.8 if self.shown else 0.2) / 1000


class _Reuse(_Client):  # pragma: no cover
    def start(self) -> int:
        wanted = int(self.args.window, 0)
        spare = []
        mask = int(self.d.display.info.resource_id_mask)
        for _ in range(64):
            if int(self.d.display.info.resource_id_base) == wanted & ~mask:
                break
            spare.append(self.d)
            self.d = Display(os.environ["DISPLAY"])
        else:
            raise SystemExit(f"reuse: never got the id range of 0x{wanted:x}")
        for other in spare:
            other.close()
        self.root = self.d.screen().root
        request.CreateWindow(
            display=self.d.display,
            onerror=None,
            depth=self.d.screen().root_depth,
            wid=wanted,
            parent=self.root,
            x=120,
            y=120,
            width=480,
            height=360,
            border_width=0,
            window_class=X.InputOutput,
            visual=X.CopyFromParent,
            attrs={
                "background_pixel": self.d.screen().white_pixel,
                "event_mask": X.KeyPressMask | X.ButtonPressMask | X.StructureNotifyMask,
            },
        )
        win = self.d.create_resource_object("window", wanted)
        self.name(win, self.args.title)
        win.map()
        self.wait_mapped(win)
        self.activate(win)
        return wanted


class _Impostor(_Client):  # pragma: no cover
    def start(self) -> int:
        win = self.window(100, 100, 480, 360, background_pixel=self.d.screen().white_pixel)
        self.name(win, self.args.title)
        win.map()
        self.wait_mapped(win)
        self.activate(win)
        return int(win.id)


class _Mover(_Client):  # pragma: no cover
    def start(self) -> int:
        x, y, w, h = _geometry(self.args.geometry)
        decoy = self.window(x, y, w, h, override_redirect=True)
        decoy.map()
        decoy.configure(stack_mode=X.Below)
        self.target = self.d.create_resource_object("window", int(self.args.window, 0))
        origin = self.target.translate_coords(self.root, 0, 0)
        self.home = (-origin.x, -origin.y)  # the client area's root position at the start
        self.size = self.target.get_geometry()
        self.step = 0
        self.extra["moves"] = 0
        return int(decoy.id)

    def tick(self) -> float:
        dx = self.args.dx if self.step % 2 == 0 else 0
        self.step += 1
        flags = (1 << 8) | (1 << 9) | (2 << 12) | 10  # x and y given, from a pager, static gravity
        message = event.ClientMessage(
            window=self.target,
            client_type=self.atom("_NET_MOVERESIZE_WINDOW"),
            data=(32, [flags, self.home[0] + dx, self.home[1], self.size.width, self.size.height]),
        )
        self.root.send_event(message, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
        self.d.flush()
        self.extra["moves"] += 1
        return self.args.period_ms / 1000


class _DialogApp(_Client):  # pragma: no cover
    """The bound application itself: a main window and a dialog that takes the keys at once."""

    def start(self) -> int:
        self.main = self.window(80, 80, 480, 360, background_pixel=self.d.screen().white_pixel)
        self.name(self.main, self.args.title)
        protocols = [self.atom("WM_DELETE_WINDOW")] + ([] if self.args.no_ping else [self.atom("_NET_WM_PING")])
        self.main.change_property(self.atom("WM_PROTOCOLS"), Xatom.ATOM, 32, protocols)
        self.main.change_attributes(event_mask=X.KeyPressMask | X.ButtonPressMask | X.StructureNotifyMask)
        self.main.map()
        self.wait_mapped(self.main)
        self.dialog: Any = None
        self.dialog_at = 0.0
        self.extra.update({"main": "", "dialog": "", "pings": 0})
        return int(self.main.id)

    def open_dialog(self) -> None:
        if self.dialog is not None:
            return
        self.dialog = self.window(640, 120, 300, 100, background_pixel=self.d.screen().white_pixel)
        self.name(self.dialog, "Dialog")
        self.dialog.change_property(self.atom("WM_TRANSIENT_FOR"), Xatom.WINDOW, 32, [int(self.main.id)])
        self.dialog.map()
        self.d.flush()
        self.extra["dialog_opened"] = True

    def event(self, e: Any) -> None:
        if e.type == X.KeyPress:
            ch = self.char(e)
            self.keys += 1
            # Like a toolkit: once the dialog exists its widgets have the (internal) focus.
            self.extra["dialog" if self.dialog is not None else "main"] += ch
            if ch and ch == self.args.trigger:
                self.open_dialog()
        elif e.type == X.ButtonPress:
            self.buttons += 1
        elif e.type == X.MapNotify and self.dialog is not None and int(e.window.id) == int(self.dialog.id):
            self.dialog.set_input_focus(X.RevertToParent, X.CurrentTime)
        elif e.type == X.ClientMessage and e.client_type == self.atom("WM_PROTOCOLS"):
            _, data = e.data
            if data[0] == self.atom("_NET_WM_PING"):
                self.extra["pings"] += 1
                pong = event.ClientMessage(window=self.root, client_type=e.client_type, data=(32, list(data)))
                self.root.send_event(pong, event_mask=X.SubstructureNotifyMask | X.SubstructureRedirectMask)
                self.d.flush()

    def command(self, line: str) -> None:
        if line == "dialog":
            self.open_dialog()
        elif line.startswith("dialog-in "):
            self.dialog_at = time.monotonic() + float(line.split()[1]) / 1000

    def tick(self) -> float:
        if self.dialog_at and time.monotonic() >= self.dialog_at:
            self.dialog_at = 0.0
            self.open_dialog()
        return 0.002


_KINDS = {
    "grab-keyboard": _Grab,
    "grab-pointer": _Grab,
    "passive-key": _Passive,
    "passive-button": _Passive,
    "child": _Child,
    "blink": _Blink,
    "reuse": _Reuse,
    "impostor": _Impostor,
    "mover": _Mover,
    "dialog-app": _DialogApp,
}


def main(argv: list[str]) -> None:  # pragma: no cover - the attacker's process
    ap = argparse.ArgumentParser(prog="attackers")
    ap.add_argument("kind", choices=sorted(_KINDS))
    ap.add_argument("--parent", default="0")
    ap.add_argument("--window", default="0")
    ap.add_argument("--geometry", default="0,0,1,1")
    ap.add_argument("--input-only", action="store_true")
    ap.add_argument("--focus", action="store_true")
    ap.add_argument("--title", default="Attacker")
    ap.add_argument("--period-ms", type=float, default=4.0)
    ap.add_argument("--dx", type=int, default=40)
    ap.add_argument("--trigger", default="")
    ap.add_argument("--no-ping", action="store_true")
    args = ap.parse_args(argv)
    client = _KINDS[args.kind](args)
    client.run(client.start())  # type: ignore[attr-defined]


# -- the controller (in the test or bench process) ----------------------------------------


class Attacker:
    """One attacker process on ``display``; a context manager. ``stop()`` returns its log.

    Args:
        kind: one of the kinds of the module docstring.
        display: the X display.
        options: command-line options, e.g. ``("--geometry", "10,10,40,40")``.
    """

    def __init__(self, kind: str, display: str, *options: str) -> None:
        self.kind = kind
        self.display = display
        self.options = options
        self.proc: subprocess.Popen[str] | None = None
        self.window = 0
        self.pid = 0
        self._lines: queue.Queue[str] = queue.Queue()
        self.summary: dict[str, Any] = {}

    def start(self, timeout: float = 20.0) -> Attacker:
        self.proc = subprocess.Popen(
            [sys.executable, "-P", str(HERE), self.kind, *self.options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "DISPLAY": self.display},
        )
        self.pid = self.proc.pid
        threading.Thread(target=self._pump, name=f"attacker-{self.kind}", daemon=True).start()
        line = self._expect("ready", timeout)
        self.window = int(line.split()[1], 16)
        return self

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put("")

    def _expect(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            try:
                line = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"attacker {self.kind}: no {prefix!r} within {timeout} s; it said {seen}") from None
            if line.startswith(prefix):
                return line
            if line == "" and self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"attacker {self.kind} exited with {self.proc.returncode}: {seen}")
            seen.append(line)

    def command(self, line: str, timeout: float = 10.0) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        self._expect(f"ack {line}", timeout)

    def stop(self, timeout: float = 10.0) -> dict[str, Any]:
        """End the attacker and return its log: keys, buttons, text, and its kind's extras."""
        if self.proc is None:
            return self.summary
        failure = ""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.summary = json.loads(self._expect("{", timeout))
        except (OSError, RuntimeError, json.JSONDecodeError) as exc:
            failure = str(exc)
        finally:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            for pipe in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    if pipe is not None:
                        pipe.close()
            self.proc = None
        if failure:
            said = []
            while not self._lines.empty():
                said.append(self._lines.get())
            raise RuntimeError(f"attacker {self.kind} ended badly ({failure}); it said {said}")
        return self.summary

    def kill(self) -> None:
        """End the process at once (its X connection closes, its windows go)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5)

    def __enter__(self) -> Attacker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
