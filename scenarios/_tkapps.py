"""Small Tk applications the desktop backend is tested and demonstrated against.

Two kinds, run as their own processes on an X display (``python -P _tkapps.py
notes|thief ...``) and driven by ``TkApp``:

- ``notes``: a note window with a text box that has the focus, three coloured buttons
  (red, green, blue) and a pad that records presses, releases and double clicks. Told
  ``steal``, it pops up its own "Notification" window with an entry that grabs the focus,
  as an update prompt would.
- ``thief``: another application with its own text box that raises itself and grabs the
  focus when told to: now (``steal``) or after a delay (``steal-in 300``, milliseconds),
  so that it can strike in the middle of a long text being typed.

Each writes what it received (text, clicks, the popup's text) to a JSON state file after
every change; tests check the fixture's real state, not what the executor says it did.
Commands go in on stdin, one a line; each is answered with ``ack <command>``.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

# Where the widgets sit in a notes window, in client coordinates: (x, y, width, height).
NOTES_SIZE = (480, 360)
NOTES_LAYOUT: dict[str, tuple[int, int, int, int]] = {
    "text": (10, 10, 460, 150),
    "red": (10, 172, 140, 56),
    "green": (170, 172, 140, 56),
    "blue": (330, 172, 140, 56),
    "pad": (10, 240, 460, 110),
}
COLOURS = {"red": "#d01010", "green": "#10a010", "blue": "#1010d0"}


# -- the applications (run in their own process) ----------------------------------------


def _app_main(argv: list[str]) -> None:  # pragma: no cover - runs in the fixture process
    import tkinter as tk

    ap = argparse.ArgumentParser(prog="tkapps")
    ap.add_argument("kind", choices=("notes", "thief"))
    ap.add_argument("--title", required=True)
    ap.add_argument("--class-name", default="")
    ap.add_argument("--geometry", default="")
    ap.add_argument("--state", required=True)
    args = ap.parse_args(argv)

    root = tk.Tk(className=args.class_name or f"handrail{args.kind}")
    root.title(args.title)
    state: dict[str, Any] = {
        "kind": args.kind,
        "title": args.title,
        "text": "",
        "clicks": [],
        "pad": [],
        "popup_text": "",
        "popup_open": False,
        "focus_in": 0,
        "stole": False,
    }
    dump_pending = [False]

    def dump() -> None:
        dump_pending[0] = False
        tmp = args.state + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f, ensure_ascii=False)
        os.replace(tmp, args.state)

    def changed() -> None:
        if not dump_pending[0]:
            dump_pending[0] = True
            root.after_idle(dump)

    text = tk.Text(root, font=("TkFixedFont", 12), undo=False)
    popup: list[tk.Toplevel] = []

    def open_popup() -> None:
        if popup:
            return
        top = tk.Toplevel(root)
        top.title("Notification")
        top.geometry("300x90+600+120")
        tk.Label(top, text="Update available. Restart now?").pack(padx=8, pady=6)
        value = tk.StringVar(top)
        entry = tk.Entry(top, textvariable=value)
        entry.pack(fill="x", padx=8)

        def typed(*_: Any) -> None:
            state["popup_text"] = value.get()
            changed()

        value.trace_add("write", typed)
        popup.append(top)
        state["popup_open"] = True
        changed()
        top.update_idletasks()
        top.lift()
        top.focus_force()
        entry.focus_set()

    def after_key(_: Any) -> None:
        state["text"] = text.get("1.0", "end-1c")
        changed()

    def log(kind: str) -> Callable[[Any], None]:
        def record(event: Any) -> None:
            state.setdefault("log", []).append(f"{kind} {event.x},{event.y} s{event.state} {text.index('insert')}")

        return record

    for seq in ("<ButtonPress>", "<ButtonRelease>", "<KeyPress>"):
        text.bind(seq, log(seq), add="+")

    # After the Text class binding has inserted the character.
    text.bindtags((str(text), "Text", "post", str(root), "all"))
    text.bind_class("post", "<KeyPress>", after_key)

    def focus_in(event: Any) -> None:
        if event.widget is root:
            state["focus_in"] += 1
            changed()

    root.bind("<FocusIn>", focus_in)

    if args.kind == "notes":
        width, height = NOTES_SIZE
        root.geometry(args.geometry or f"{width}x{height}+80+80")
        x, y, w, h = NOTES_LAYOUT["text"]
        text.place(x=x, y=y, width=w, height=h)
        for name, colour in COLOURS.items():
            x, y, w, h = NOTES_LAYOUT[name]
            button = tk.Frame(root, background=colour, width=w, height=h)
            button.place(x=x, y=y, width=w, height=h)

            def clicked(event: Any, name: str = name) -> None:
                state["clicks"].append({"widget": name, "x": event.x, "y": event.y, "num": event.num})
                changed()

            button.bind("<ButtonPress>", clicked)
        x, y, w, h = NOTES_LAYOUT["pad"]
        pad = tk.Canvas(root, background="#e0e0e0", highlightthickness=0)
        pad.place(x=x, y=y, width=w, height=h)

        def pad_event(kind: str) -> Callable[[Any], None]:
            def record(event: Any) -> None:
                state["pad"].append({"event": kind, "x": event.x, "y": event.y, "num": getattr(event, "num", 0)})
                changed()

            return record

        pad.bind("<ButtonPress>", pad_event("press"))
        pad.bind("<ButtonRelease>", pad_event("release"))
        pad.bind("<Double-Button-1>", pad_event("double"))
    else:
        root.geometry(args.geometry or "360x200+640+360")
        text.pack(fill="both", expand=True, padx=6, pady=6)
    text.focus_set()

    tries = [0]

    def grab() -> None:
        root.lift()
        root.attributes("-topmost", True)
        root.focus_force()
        text.focus_set()

    def confirm() -> None:
        # The window manager or the server may not honour the first attempt (a focus change
        # racing with ours): try again until Tk sees the focus arrive.
        if root.focus_get() is not None:
            state["stole"] = True
            changed()
        elif tries[0] < 50:
            tries[0] += 1
            grab()
            root.after(20, confirm)

    def steal() -> None:
        if args.kind == "notes":
            open_popup()
            return
        tries[0] = 0
        grab()
        root.after(20, confirm)

    def command(line: str) -> None:
        parts = line.split()
        if not parts:
            return
        if parts[0] == "steal":
            steal()
        elif parts[0] == "steal-in":
            root.after(int(parts[1]), steal)
        elif parts[0] == "move":
            root.geometry(f"+{int(parts[1])}+{int(parts[2])}")
        elif parts[0] == "resize":
            root.geometry(f"{int(parts[1])}x{int(parts[2])}")
        elif parts[0] == "withdraw":
            root.withdraw()
        elif parts[0] == "close-popup" and popup:
            popup.pop().destroy()
            state["popup_open"] = False
        elif parts[0] == "quit":
            root.after(10, root.destroy)
        root.update_idletasks()
        dump()

    def on_stdin(*_: Any) -> None:
        line = sys.stdin.readline()
        if not line:
            root.destroy()
            return
        command(line.strip())
        print(f"ack {line.strip()}", flush=True)

    root.tk.createfilehandler(sys.stdin, tk.READABLE, on_stdin)

    def ready() -> None:
        dump()
        print("ready", flush=True)

    root.update_idletasks()
    root.wait_visibility(root)
    root.after(150, ready)
    root.mainloop()


# -- the controller (in the test or demo process) ---------------------------------------


class TkApp:
    """A fixture application in its own process on ``display``; a context manager.

    Args:
        kind: ``"notes"`` or ``"thief"``.
        display: the X display, e.g. ``":90"``.
        title: the window title (make it unique per test to bind sessions by it).
        geometry: Tk geometry, e.g. ``"480x360+80+80"``; the kind's default when empty.
    """

    def __init__(
        self,
        kind: str,
        display: str,
        *,
        title: str,
        geometry: str = "",
        class_name: str = "",
    ) -> None:
        self.kind = kind
        self.display = display
        self.title = title
        self.geometry = geometry
        self.class_name = class_name
        self.proc: subprocess.Popen[str] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._lines: queue.Queue[str] = queue.Queue()
        self._window = 0

    @property
    def state_path(self) -> Path:
        assert self._dir is not None
        return Path(self._dir.name) / "state.json"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 20.0) -> TkApp:
        self._dir = tempfile.TemporaryDirectory(prefix=f"handrail-{self.kind}-")
        # Run this file as a script (-P: without its folder on sys.path), not with -m,
        # which would import the whole harness into the app's process first.
        args = [sys.executable, "-P", __file__, self.kind, "--title", self.title]
        args += ["--state", str(self.state_path)]
        if self.geometry:
            args += ["--geometry", self.geometry]
        if self.class_name:
            args += ["--class-name", self.class_name]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            env={**os.environ, "DISPLAY": self.display},
        )
        threading.Thread(target=self._pump, name=f"tkapp-{self.kind}", daemon=True).start()
        self._expect("ready", timeout)
        return self

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put("")  # end of output

    def _expect(self, wanted: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise RuntimeError(f"{self.kind} app: no {wanted!r} within {timeout} s; it said {seen}") from None
            if line == wanted:
                return
            if line == "" and self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} app exited with {self.proc.returncode}: {seen}")
            seen.append(line)

    def command(self, line: str, timeout: float = 10.0) -> None:
        """Send one command and wait for its ack.

        Commands: ``steal``, ``steal-in MS``, ``move X Y``, ``resize W H``, ``withdraw``,
        ``close-popup``.
        """
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        self._expect(f"ack {line}", timeout)

    def state(self) -> dict[str, Any]:
        """What the application has received so far."""
        return json.loads(self.state_path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]

    def wait_state(self, holds: Callable[[dict[str, Any]], bool], timeout: float = 5.0) -> dict[str, Any]:
        """Poll the state until ``holds(state)``; return the last state either way."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if holds(state) or time.monotonic() > deadline:
                return state
            time.sleep(0.02)

    def settled_state(self, quiet: float = 0.3, timeout: float = 5.0) -> dict[str, Any]:
        """The state once it has not changed for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        last = self.state()
        since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.03)
            now = self.state()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return last

    def window_id(self) -> int:
        """The id of the application's main window (managed, as the window manager lists it)."""
        if self._window:
            return self._window
        from ._x11 import connect  # not at the top: this file also runs as the app's own script

        with connect(self.display) as x:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                for wid in x.stacking():
                    if x.pid(wid) == self.pid and x.title(wid) == self.title:
                        self._window = wid
                        return wid
                time.sleep(0.05)
        raise RuntimeError(f"no window titled {self.title!r} of pid {self.pid}")

    def stop(self) -> None:
        if self.proc is not None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
            if self.proc.poll() is None:
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> TkApp:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


if __name__ == "__main__":  # pragma: no cover
    _app_main(sys.argv[1:])
