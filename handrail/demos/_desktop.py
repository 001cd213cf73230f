"""``handrail demo --desktop``: the guarded loop on a real X11 window, for a newcomer.

It starts Xvfb with openbox on a free display, a small Tk note-taking window and a
"chat" window that grabs the focus when told to, the authz sidecar and the executor as
separate processes, grants a scripted agent input on the notes window and drives it over
gRPC: typing (non-ASCII included), a keystroke refused after the chat window stole the
focus (nothing typed into either window), activating the notes window again, a click
found in a scaled screenshot, and a person at the desk pausing the agent. It prints the
ledger's timeline and the fixtures' final state, stops what it started, and exits
non-zero if any step misbehaved.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from handrail.authz import AuthzClient
from handrail.executor import DesktopTarget, ExecutorClient, Outcome
from handrail.scenarios import COLOURS, TkApp, VirtualDisplay, start_authz, start_executor

from ._common import AGENT, EXECUTOR, OPERATOR, Steps, make_principals

__all__ = ["TARGET", "run_desktop_demo"]

TARGET = "desktop:notes-demo"
NOTES_TITLE = "Handrail Notes — demo"
CHAT_TITLE = "Chat — 1 new message"


def _centre_of(png: bytes, colour: str) -> tuple[int, int] | None:
    """The centre of the pixels of ``colour`` (``#rrggbb``) in a PNG, as an agent would find it."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    xs, ys = [], []
    for y in range(image.height):
        for x in range(image.width):
            pixel = image.getpixel((x, y))
            assert isinstance(pixel, tuple)
            if all(abs(a - b) < 40 for a, b in zip(pixel, want, strict=False)):
                xs.append(x)
                ys.append(y)
    if not xs:
        return None
    return sum(xs) // len(xs), sum(ys) // len(ys)


def run_desktop_demo(data_dir: Path, out: TextIO = sys.stdout) -> int:
    """Run the desktop demo with its data in ``data_dir``; return 0 when every step behaved."""
    steps = Steps(out)
    tokens = make_principals(data_dir)

    previous_display = os.environ.get("DISPLAY")
    notes_state: dict[str, Any] = {}
    chat_state: dict[str, Any] = {}
    try:
        with ExitStack() as stack:
            vd = stack.enter_context(VirtualDisplay())
            os.environ["DISPLAY"] = vd.display  # the executor process inherits it
            steps.say(f"display: Xvfb {vd.display} (pid {vd.xvfb.pid if vd.xvfb else '?'}) with openbox")
            chat = stack.enter_context(TkApp("thief", vd.display, title=CHAT_TITLE))
            notes = stack.enter_context(TkApp("notes", vd.display, title=NOTES_TITLE))
            steps.say(f"fixtures: {NOTES_TITLE!r} (pid {notes.pid}) and {CHAT_TITLE!r} (pid {chat.pid})")
            authz_proc = start_authz(data_dir)
            stack.callback(authz_proc.stop)
            steps.say(f"authz sidecar: pid {authz_proc.proc.pid}, {authz_proc.address}")
            exec_proc = start_executor(data_dir, authz_proc.address, tokens[EXECUTOR])
            stack.callback(exec_proc.stop)
            steps.say(f"executor: pid {exec_proc.proc.pid}, {exec_proc.address}")

            operator = stack.enter_context(AuthzClient(authz_proc.address, tokens[OPERATOR]))
            grant = operator.grant(AGENT, TARGET, ["input", "submit"], [], note="write today's meeting notes")
            steps.say(f"operator {OPERATOR} granted {AGENT}: input, submit on {TARGET} ({grant.grant_id})")

            agent = stack.enter_context(ExecutorClient(exec_proc.address, tokens[AGENT]))
            session = agent.open_session(target=TARGET, desktop=DesktopTarget(title_pattern="^Handrail Notes"))
            obs = session.observe()
            d = obs.desktop
            assert d is not None
            steps.say(
                f"agent {AGENT} opened {session.session_id}, bound to window 0x{d.target.window_id:x} "
                f"(pid {d.target.pid}, class {d.target.wm_class}) — lease epoch {obs.lease_epoch}"
            )

            steps.say("\n1. typing reaches the bound window")
            text = "Meeting notes: héllo ü€ 中. "
            r = session.type(text).result
            steps.expect("the text is typed", r.outcome is Outcome.DONE, f"{r.outcome.value}, {r.typed_chars} chars")
            got = notes.wait_state(lambda st: st["text"] == text)["text"]
            steps.expect("the notes window received it intact, non-ASCII included", got == text, repr(got))

            steps.say("\n2. a chat window steals the focus between observe and act")
            session.observe()
            chat.command("steal")
            chat.wait_state(lambda st: st["stole"])
            time.sleep(0.2)
            r = session.type("my password is hunter2").result
            steps.expect(
                "the keystrokes are refused before any is sent",
                r.outcome is Outcome.REFUSED and r.reason == "FOCUS_MISMATCH" and not r.execution_started,
                f"{r.outcome.value} {r.reason}: {r.message}",
            )
            steps.expect("nothing reached the chat window", chat.settled_state()["text"] == "")
            steps.expect("nothing more reached the notes window", notes.settled_state()["text"] == text)

            steps.say("\n3. the agent sees the chat window on top and activates its own window")
            obs = session.observe()
            active = obs.desktop.active if obs.desktop else None
            steps.say(f"  observation: the active window is {active.title if active else 'none'!r}")
            r = session.activate().result
            steps.expect("activating the notes window is allowed and done", r.outcome is Outcome.DONE, r.message)
            more = "Action items follow."
            r = session.type(more).result
            steps.expect("typing goes on into the notes window", r.outcome is Outcome.DONE, r.message)
            got = notes.wait_state(lambda st: st["text"] == text + more)["text"]
            steps.expect("the notes window has both parts", got == text + more, repr(got))

            steps.say("\n4. a click found in a scaled screenshot")
            obs = session.observe(screenshot=True, screenshot_scale=0.5)
            point = _centre_of(obs.screenshot_png, COLOURS["green"])
            steps.say(f"  the green button is at {point} in the half-size screenshot")
            if point is not None:
                r = session.click(x=point[0], y=point[1]).result
                clicks = notes.wait_state(lambda st: bool(st["clicks"]))["clicks"]
                steps.expect(
                    "the click maps back to the green button",
                    r.outcome is Outcome.DONE and [c["widget"] for c in clicks] == ["green"],
                    f"{r.outcome.value}; clicks {clicks}",
                )
            else:
                steps.expect("the green button is visible in the screenshot", False)

            if shutil.which("xdotool"):
                steps.say("\n5. a person at the desk")
                session.observe()
                subprocess.run(["xdotool", "type", "--delay", "20", " (edited by Alice)"], env=vd.env(), check=True)
                time.sleep(0.3)
                r = session.type("agent text").result
                steps.expect(
                    "the agent's next keystrokes wait for the person",
                    r.outcome is Outcome.REFUSED and r.reason == "HELD_BY_HUMAN",
                    f"{r.outcome.value} {r.reason}: {r.message}",
                )
            session.close()
            notes_state, chat_state = notes.settled_state(), chat.settled_state()
            stack.pop_all().close()  # stop everything before reading the ledger
    finally:
        if previous_display is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = previous_display

    steps.say("\nfixtures' final state:")
    steps.say(f"  notes text {notes_state.get('text', '')!r}")
    steps.say(f"  notes clicks {[c['widget'] for c in notes_state.get('clicks', [])]}")
    steps.say(f"  chat text {chat_state.get('text', '')!r}")
    steps.expect("the chat window never received a keystroke", chat_state.get("text") == "")
    steps.expect(
        "the agent's text is in the notes window, and nothing after the person's edit",
        notes_state.get("text", "").startswith(text + "Action items follow.")
        and "agent text" not in notes_state.get("text", ""),
    )

    return steps.finish(data_dir / "ledger.sqlite", "desktop demo")
