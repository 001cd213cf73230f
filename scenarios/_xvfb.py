"""A virtual X display for the desktop backend: Xvfb on a free display, with openbox.

The desktop backend's focus check reads ``_NET_ACTIVE_WINDOW``, which only an EWMH window
manager maintains, so a bare Xvfb is not enough: ``VirtualDisplay`` starts Xvfb on the
first free display number from 90 up, waits until it accepts connections, starts openbox
on it, waits until openbox has announced itself (``_NET_SUPPORTING_WM_CHECK``), and stops
both on exit. Used by desktop scenarios, the desktop tests, ``handrail demo --desktop``
and the benchmarks.

openbox runs with its shipped configuration less the mouse bindings of its ``Client``
context ("Focus, Raise" on a press in a window): openbox takes those presses with a
synchronous passive grab and replays them after the executor's server grab has ended,
where any other client could have mapped a window at the point first. The desktop backend
refuses clicks a passive grab would take (``docs/desktop.md``), so it could not click at
all under the stock configuration.

    with VirtualDisplay() as vd:
        subprocess.run(["xmessage", "hi"], env={**os.environ, **vd.env()})
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from ._errors import DisplayError

__all__ = ["FIRST_DISPLAY", "LAST_DISPLAY", "DisplayError", "VirtualDisplay", "free_display"]

FIRST_DISPLAY = 90
LAST_DISPLAY = 400
_SOCKET_DIR = Path("/tmp/.X11-unix")
_OPENBOX_RC = Path("/etc/xdg/openbox/rc.xml")
_MINIMAL_RC = """<?xml version="1.0" encoding="UTF-8"?>
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
</openbox_config>
"""


def openbox_config() -> str:
    """openbox's shipped rc.xml without its Client-context mouse bindings (a minimal one if absent)."""
    try:
        shipped = _OPENBOX_RC.read_text(encoding="utf-8")
    except OSError:
        return _MINIMAL_RC
    return re.sub(r'<context name="Client">.*?</context>', "", shipped, flags=re.S)


def _display_taken(n: int) -> bool:
    return (_SOCKET_DIR / f"X{n}").exists() or Path(f"/tmp/.X{n}-lock").exists()


def free_display(start: int = FIRST_DISPLAY) -> int:
    """The first display number from ``start`` with neither a socket nor a lock file."""
    for n in range(start, LAST_DISPLAY):
        if not _display_taken(n):
            return n
    raise DisplayError(f"no free X display number in {start}..{LAST_DISPLAY - 1}")


def _accepts(n: int) -> bool:
    """Whether the display's Unix socket accepts a connection (Xvfb is listening)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(_SOCKET_DIR / f"X{n}"))
        except OSError:
            return False
    return True


def _stop(proc: subprocess.Popen[bytes] | None, timeout: float = 5.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class VirtualDisplay:
    """Xvfb plus openbox on a free display; a context manager that stops both.

    Args:
        width, height, depth: the screen.
        window_manager: start openbox (the focus check needs an EWMH window manager).
        timeout: seconds to wait for each process to be ready.
    """

    def __init__(
        self,
        width: int = 1280,
        height: int = 800,
        depth: int = 24,
        *,
        window_manager: bool = True,
        timeout: float = 15.0,
    ) -> None:
        self.width = width
        self.height = height
        self.depth = depth
        self.window_manager = window_manager
        self.timeout = timeout
        self.number = 0
        self.xvfb: subprocess.Popen[bytes] | None = None
        self.wm: subprocess.Popen[bytes] | None = None
        self._logdir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def display(self) -> str:
        """The display name, e.g. ``":90"``."""
        return f":{self.number}"

    def env(self) -> dict[str, str]:
        """Environment variables that point a child process at this display."""
        return {"DISPLAY": self.display}

    def log(self) -> str:
        """What Xvfb and openbox printed (for error messages)."""
        if self._logdir is None:
            return ""
        parts = []
        for name in ("xvfb.log", "openbox.log"):
            path = Path(self._logdir.name) / name
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-2000:]}")
        return "\n".join(parts)

    def start(self) -> VirtualDisplay:
        for tool in ("Xvfb", *(("openbox",) if self.window_manager else ())):
            if shutil.which(tool) is None:
                raise DisplayError(f"{tool} is not installed (apt-get install -y xvfb openbox xdotool)")
        self._logdir = tempfile.TemporaryDirectory(prefix="handrail-xvfb-")
        try:
            self._start_xvfb()
            if self.window_manager:
                self._start_wm()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_xvfb(self) -> None:
        assert self._logdir is not None
        start = FIRST_DISPLAY
        for _ in range(10):  # another process may take the number between our check and Xvfb's
            n = free_display(start)
            with open(Path(self._logdir.name) / "xvfb.log", "wb") as log:
                proc = subprocess.Popen(
                    ["Xvfb", f":{n}", "-screen", "0", f"{self.width}x{self.height}x{self.depth}", "-nolisten", "tcp"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            deadline = time.monotonic() + self.timeout
            while proc.poll() is None and time.monotonic() < deadline:
                if _accepts(n):
                    self.number, self.xvfb = n, proc
                    return
                time.sleep(0.02)
            _stop(proc)
            start = n + 1
        raise DisplayError("Xvfb did not start:\n" + self.log())

    def _start_wm(self) -> None:
        assert self._logdir is not None
        config = Path(self._logdir.name) / "openbox-rc.xml"
        config.write_text(openbox_config(), encoding="utf-8")
        with open(Path(self._logdir.name) / "openbox.log", "wb") as log:
            self.wm = subprocess.Popen(
                ["openbox", "--sm-disable", "--config-file", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env()},
            )
        from handrail.scenarios._x11 import connect

        with connect(self.display) as x:
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                if self.wm.poll() is not None:
                    raise DisplayError(f"openbox exited with {self.wm.returncode}:\n" + self.log())
                if x.wm_name():
                    return
                time.sleep(0.02)
        raise DisplayError(f"openbox did not take {self.display} within {self.timeout:.0f} s:\n" + self.log())

    def stop(self) -> None:
        _stop(self.wm)
        _stop(self.xvfb)
        self.wm = self.xvfb = None
        if self._logdir is not None:
            self._logdir.cleanup()
            self._logdir = None

    def __enter__(self) -> VirtualDisplay:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
