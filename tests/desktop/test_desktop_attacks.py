"""Hostile X clients against a bound window: nothing may land outside it, nothing lands unsaid.

Each test starts its own attacker (``attackers.py``: a separate process with its own X
connection, counting what its windows receive) against the desktop backend in this
process, on the real Xvfb + openbox, and judges by the attacker's own log and the fixture
application's state — never by what the backend says it did.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from Xlib import X
from Xlib.ext import xtest

from handrail.executor._backend import DispatchResult, DispatchStatus, Refusal
from handrail.executor._errors import ExecutorError
from handrail.executor._models import ActionKind, ActionSpec, DesktopTarget, Observation
from handrail.executor.desktop import X11, DesktopSurface, open_desktop
from handrail.scenarios._tkapps import NOTES_LAYOUT, TkApp
from tests.desktop.attackers import Attacker
from tests.desktop.conftest import activate, observe, steal_while_typing, surface, unique_title

pytestmark = pytest.mark.desktop


def spec(obs: Observation, kind: ActionKind, **kw: object) -> ActionSpec:
    return ActionSpec(kind=kind, observation_id=obs.observation_id, idempotency_key="k", **kw)  # type: ignore[arg-type]


async def act(
    s: DesktopSurface, obs: Observation, kind: ActionKind, **kw: object
) -> tuple[Refusal | None, DispatchResult | None]:
    """The early check, and the dispatch (which checks again) when it passed."""
    action = spec(obs, kind, **kw)
    refusal = await s.check_fresh(obs, action, None)
    if refusal is not None:
        return refusal, None
    return None, await s.dispatch(action, 10_000)


def refused(outcome: tuple[Refusal | None, DispatchResult | None]) -> tuple[str, str]:
    """(reason, message) of an action refused early or not started at dispatch; else fail."""
    refusal, result = outcome
    if refusal is not None:
        return str(refusal.reason), refusal.message
    assert result is not None and result.status is DispatchStatus.NOT_STARTED, result
    return str(result.reason), result.message


def pad_point(name: str = "pad") -> tuple[int, int]:
    x, y, w, h = NOTES_LAYOUT[name]
    return x + w // 2, y + h // 2


def root_rect(obs: Observation, name: str) -> str:
    """A widget's rectangle in root coordinates, as an attacker's --geometry."""
    assert obs.desktop is not None
    x, y, w, h = NOTES_LAYOUT[name]
    return f"{obs.desktop.target.x + x},{obs.desktop.target.y + y},{w},{h}"


# -- 1. another client holds a grab ------------------------------------------------------


def test_a_keyboard_grab_by_another_client_refuses_keys_and_names_the_holder(notes: TkApp, xdisplay: str) -> None:
    async def body() -> tuple[tuple[Refusal | None, DispatchResult | None], dict[str, object], int]:
        async with surface(notes) as s:
            with Attacker("grab-keyboard", xdisplay) as attacker:
                obs = await observe(s)
                outcome = await act(s, obs, ActionKind.TYPE, text="secret")
                return outcome, attacker.stop(), attacker.pid

    outcome, log, pid = asyncio.run(body())
    assert log["keys"] == 0, f"the grabbing client received keys: {log}"
    reason, message = refused(outcome)
    assert reason == "FOCUS_MISMATCH" and "keyboard grab" in message and f"pid {pid}" in message, message
    assert notes.settled_state()["text"] == ""


def test_a_pointer_grab_by_another_client_refuses_clicks(notes: TkApp, xdisplay: str) -> None:
    async def body() -> tuple[tuple[Refusal | None, DispatchResult | None], dict[str, object]]:
        async with surface(notes) as s:
            with Attacker("grab-pointer", xdisplay) as attacker:
                obs = await observe(s)
                x, y = pad_point()
                outcome = await act(s, obs, ActionKind.CLICK, x=x, y=y)
                return outcome, attacker.stop()

    outcome, log = asyncio.run(body())
    assert log["buttons"] == 0, f"the grabbing client received clicks: {log}"
    reason, message = refused(outcome)
    assert reason == "FOCUS_MISMATCH" and "pointer grab" in message, message
    assert notes.settled_state()["pad"] == []


@pytest.mark.parametrize("kind", ["passive-key", "passive-button"])
def test_a_passive_grab_of_every_key_or_button_on_the_root_refuses_the_input(
    notes: TkApp, xdisplay: str, kind: str
) -> None:
    async def body() -> tuple[tuple[Refusal | None, DispatchResult | None], dict[str, object]]:
        async with surface(notes) as s:
            with Attacker(kind, xdisplay) as attacker:
                obs = await observe(s)
                if kind == "passive-key":
                    outcome = await act(s, obs, ActionKind.TYPE, text="secret")
                else:
                    x, y = pad_point()
                    outcome = await act(s, obs, ActionKind.CLICK, x=x, y=y)
                return outcome, attacker.stop()

    outcome, log = asyncio.run(body())
    assert log["keys"] == 0 and log["buttons"] == 0, f"the grabbing client received input: {log}"
    reason, message = refused(outcome)
    assert reason == "FOCUS_MISMATCH" and "passive grab" in message and "root window" in message, message
    state = notes.settled_state()
    assert state["text"] == "" and state["pad"] == []


# -- 2. windows inside the target that the target does not own ------------------------------


def test_an_input_only_window_of_another_client_inside_the_target_is_refused_by_name(
    notes: TkApp, xdisplay: str
) -> None:
    x, y, w, h = NOTES_LAYOUT["pad"]

    async def body() -> tuple[tuple[Refusal | None, DispatchResult | None], dict[str, object], int]:
        async with surface(notes) as s:
            geometry = f"{x},{y},{w},{h}"  # in the target window's own coordinates
            with Attacker("child", xdisplay, "--parent", hex(s.window_id), "--geometry", geometry, "--input-only") as a:
                obs = await observe(s)
                px, py = pad_point()
                outcome = await act(s, obs, ActionKind.CLICK, x=px, y=py)
                # The rest of the window is still the target's own: a click there goes out.
                gx, gy = pad_point("green")
                _, elsewhere = await act(s, obs, ActionKind.CLICK, x=gx, y=gy)
                assert elsewhere is not None and elsewhere.status is DispatchStatus.DONE, elsewhere
                return outcome, a.stop(), a.window

    outcome, log, child = asyncio.run(body())
    assert log["buttons"] == 0, f"the input-only window received clicks: {log}"
    reason, message = refused(outcome)
    assert reason == "TARGET_CHANGED" and f"0x{child:x}" in message and "another client" in message, message
    state = notes.settled_state()
    assert state["pad"] == [] and [c["widget"] for c in state["clicks"]] == ["green"]


def test_keys_refused_while_another_clients_window_inside_the_target_lies_under_the_pointer(
    notes: TkApp, xdisplay: str
) -> None:
    async def body() -> tuple[tuple[Refusal | None, DispatchResult | None], dict[str, object], int]:
        async with surface(notes) as s:
            obs = await observe(s)
            assert obs.desktop is not None
            width, height = obs.desktop.target.width, obs.desktop.target.height
            # The pointer rests over the target, as after any click in it.
            mover = X11(xdisplay)
            xtest.fake_input(mover.display, X.MotionNotify, x=obs.desktop.target.x + 50, y=obs.desktop.target.y + 50)
            mover.sync()
            mover.close()
            await asyncio.sleep(0.3)
            geometry = f"0,0,{width},{height}"
            with Attacker("child", xdisplay, "--parent", hex(s.window_id), "--geometry", geometry, "--input-only") as a:
                obs = await observe(s)  # the agent looks again: the window is invisible
                outcome = await act(s, obs, ActionKind.TYPE, text="secret")
                return outcome, a.stop(), a.window

    outcome, log, child = asyncio.run(body())
    assert log["keys"] == 0, f"the input-only window received keys: {log}"
    reason, message = refused(outcome)
    assert reason == "TARGET_CHANGED" and f"0x{child:x}" in message and "under the pointer" in message, message
    assert notes.settled_state()["text"] == ""


def test_an_invisible_child_of_another_client_that_takes_the_focus_gets_no_keys(notes: TkApp, xdisplay: str) -> None:
    async def body() -> tuple[tuple[Refusal | None, DispatchResult | None], dict[str, object], int]:
        async with surface(notes) as s:
            args = ("--parent", hex(s.window_id), "--geometry", "0,0,8,8", "--focus")
            with Attacker("child", xdisplay, *args) as a:
                obs = await observe(s)
                outcome = await act(s, obs, ActionKind.TYPE, text="secret")
                return outcome, a.stop(), a.window

    outcome, log, child = asyncio.run(body())
    assert log["keys"] == 0, f"the focused child received keys: {log}"
    reason, message = refused(outcome)
    assert reason == "TARGET_CHANGED" and f"0x{child:x}" in message and "keyboard focus" in message, message
    assert notes.settled_state()["text"] == ""


# -- 3. a window id reused after the target's client is gone ----------------------------------


def test_a_window_id_reused_by_another_client_is_never_the_target(xdisplay: str) -> None:
    title = unique_title("Victim")
    victim = TkApp("notes", xdisplay, title=title).start()

    async def body() -> tuple[str, tuple[Refusal | None, DispatchResult | None], DispatchResult, dict[str, object]]:
        activate(victim)
        s = await open_desktop(DesktopTarget(display=xdisplay, window_id=victim.window_id()))
        try:
            obs = await observe(s)
            wid = s.window_id
            assert victim.proc is not None
            victim.proc.kill()  # its connection closes; its id range is free for the next client
            victim.proc.wait(5)
            with Attacker("reuse", xdisplay, "--window", hex(wid), "--title", title) as impostor:
                assert impostor.window == wid  # the very id the session is bound to
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and s._x.active_window() != wid:
                    await asyncio.sleep(0.02)
                gone = ""
                try:
                    await observe(s)
                except ExecutorError as exc:
                    gone = f"{exc.reason}: {exc}"
                outcome = await act(s, obs, ActionKind.TYPE, text="secret")
                s._cited = obs  # past the early check, dispatch refuses too
                late = await s.dispatch(spec(obs, ActionKind.TYPE, text="secret"), 5_000)
                return gone, outcome, late, impostor.stop()
        finally:
            await s.close()
            victim.stop()

    gone, outcome, late, log = asyncio.run(body())
    assert log["keys"] == 0, f"the window that took the bound id received keys: {log}"
    assert gone.startswith("TARGET_GONE: ") and "destroyed" in gone, gone
    assert refused(outcome)[0] == "TARGET_GONE"
    assert late.status is DispatchStatus.NOT_STARTED and late.reason == "TARGET_GONE", late


# -- 4. the gap between the last check and the input -----------------------------------------


async def _click_until(s: DesktopSurface, point: tuple[int, int], done_wanted: int, tries: int) -> tuple[int, int]:
    """Observe and click at ``point`` until ``done_wanted`` clicks went out or ``tries`` ran out."""
    done = refusals = 0
    for _ in range(tries):
        try:
            obs = await observe(s)
        except ExecutorError:
            continue
        _, result = await act(s, obs, ActionKind.CLICK, x=point[0], y=point[1])
        if result is not None and result.status is DispatchStatus.DONE:
            done += 1
            if done >= done_wanted:
                break
        else:
            refusals += 1
    return done, refusals


def _pad_presses(notes: TkApp, at_least: int) -> int:
    notes.wait_state(lambda st: len([e for e in st["pad"] if e["event"] != "release"]) >= at_least)
    time.sleep(0.3)
    return len([e for e in notes.state()["pad"] if e["event"] != "release"])


@pytest.mark.slow
def test_a_blinking_overlay_never_gets_a_click(notes: TkApp, xdisplay: str) -> None:
    """An overlay over the pad, hidden a fifth of every 2.5 ms. On a slow machine every
    check may find it up (all refused: safe, but the race is not seen from both sides):
    the overlay then blinks slower, up to 10 ms, until some click goes out."""

    async def body() -> tuple[int, int, list[dict[str, object]]]:
        done = refusals = 0
        logs = []
        async with surface(notes) as s:
            obs = await observe(s)
            for period in ("2.5", "5", "10"):
                with Attacker("blink", xdisplay, "--geometry", root_rect(obs, "pad"), "--period-ms", period) as blink:
                    got, refused = await _click_until(s, pad_point(), 25, 400 if period == "2.5" else 200)
                    logs.append(blink.stop())
                done, refusals = done + got, refusals + refused
                if done:
                    break
        return done, refusals, logs

    done, refusals, logs = asyncio.run(body())
    for log in logs:
        assert log["buttons"] == 0, f"the blinking overlay received clicks: {log}"
    assert _pad_presses(notes, done) == done  # every click said DONE reached the pad, and no other
    assert done > 0 and refusals > 0, (done, refusals)  # both sides of the race were seen


@pytest.mark.slow
def test_a_moving_target_never_sends_a_click_outside_it(notes: TkApp, xdisplay: str) -> None:
    async def body() -> tuple[int, dict[str, object]]:
        async with surface(notes) as s:
            obs = await observe(s)
            assert obs.desktop is not None
            t = obs.desktop.target
            decoy = f"{t.x - 200},{t.y - 100},{t.width + 400},{t.height + 200}"
            options = ("--window", hex(s.window_id), "--dx", "60", "--period-ms", "2", f"--geometry={decoy}")
            with Attacker("mover", xdisplay, *options) as mover:
                near_the_left_edge = (NOTES_LAYOUT["pad"][0] + 4, NOTES_LAYOUT["pad"][1] + 30)
                done, _ = await _click_until(s, near_the_left_edge, 25, 300)
                return done, mover.stop()

    done, log = asyncio.run(body())
    assert log["buttons"] == 0, f"the decoy under the moving target received clicks: {log}"
    assert log["moves"] > 20
    assert _pad_presses(notes, done) == done


# -- 5. focus moves inside the application first ----------------------------------------------


async def _type_into_app(xdisplay: str, app: Attacker, text: str, arm: str = "", **kw: object) -> DispatchResult:
    """Bind the application's window, observe, type ``text``; ``arm`` goes to the app once the
    early check passed (an attack that must start while the text is being typed)."""
    s = await open_desktop(DesktopTarget(display=xdisplay, window_id=app.window))
    try:
        s._x.request_activate(s.window_id)
        for _ in range(300):
            if s._x.active_window() == s.window_id:
                break
            await asyncio.sleep(0.01)
        obs = await observe(s)
        typing = spec(obs, ActionKind.TYPE, text=text, **kw)
        assert await s.check_fresh(obs, typing, None) is None
        if arm:
            app.command(arm)
        result = await s.dispatch(typing, 20_000)
        await asyncio.sleep(0.3)
        return result
    finally:
        await s.close()


def _sent(result: DispatchResult) -> int:
    """Characters sent: those counted, and the one in doubt when the message names it."""
    return result.typed_chars + ("it is not counted" in result.message)


@pytest.mark.parametrize("ping", [True, False], ids=["ping", "no-ping"])
def test_a_dialog_the_application_opens_on_a_key_stops_typing_and_is_not_counted(xdisplay: str, ping: bool) -> None:
    text = "abc!defghijk"
    options = ("--title", unique_title("Dialog app"), "--trigger", "!", *(() if ping else ("--no-ping",)))
    with Attacker("dialog-app", xdisplay, *options) as app:
        result = asyncio.run(_type_into_app(xdisplay, app, text))
        log = app.stop()
    main, dialog = str(log["main"]), str(log["dialog"])
    assert log["dialog_opened"] and main + dialog == text[: len(main) + len(dialog)], log
    assert result.status is DispatchStatus.PARTIAL and result.reason == "FOCUS_MISMATCH", result
    assert "opened" in result.message, result.message
    assert len(main) + len(dialog) == _sent(result)  # nothing was sent once the dialog was seen
    if ping:
        # The application said it had handled each key before the next went out: the
        # dialog it opened on "!" got nothing, and "!" itself is in doubt, not counted.
        assert dialog == "" and main == "abc!", log
        assert result.typed_chars == 3 and "'!'" in result.message, result


def test_a_dialog_the_application_opens_by_itself_gets_at_most_the_one_key_in_doubt(xdisplay: str) -> None:
    text = "the quick brown fox jumps over the lazy dog " * 4
    with Attacker("dialog-app", xdisplay, "--title", unique_title("Dialog app")) as app:
        # An "update available" prompt of the application itself, while the text is typed.
        result = asyncio.run(_type_into_app(xdisplay, app, text, arm="dialog-in 60", key_delay_ms=2))
        log = app.stop()
    main, dialog = str(log["main"]), str(log["dialog"])
    assert log["dialog_opened"] and result.status is DispatchStatus.PARTIAL, (result, log)
    assert result.typed_chars <= len(main) and len(dialog) <= 1, (result, log)  # never counted, at most one
    assert len(main) + len(dialog) == _sent(result)


def test_a_tk_dialog_that_opens_mid_typing_stops_typing_at_once(notes: TkApp) -> None:
    """Tk answers no _NET_WM_PING: typing stops at the first check that sees the dialog."""
    text = "the quick brown fox jumps over the lazy dog " * 4

    async def body() -> DispatchResult:
        async with surface(notes) as s:
            obs = await observe(s)
            typing = spec(obs, ActionKind.TYPE, text=text, key_delay_ms=2)
            assert await s.check_fresh(obs, typing, None) is None
            watcher = steal_while_typing(notes, notes)  # the notes application opens its own prompt
            result = await s.dispatch(typing, 20_000)
            watcher.join(10)
            return result

    result = asyncio.run(body())
    state = notes.settled_state()
    got, popup = state["text"], state["popup_text"]
    assert state["popup_open"] and result.status is DispatchStatus.PARTIAL, result
    assert "opened" in result.message and result.reason == "FOCUS_MISMATCH", result.message
    assert got + popup == text[: len(got) + len(popup)]
    assert len(got) + len(popup) == _sent(result)  # nothing after the check that saw it


def test_a_window_manager_shortcut_is_refused_not_sent(notes: TkApp) -> None:
    """openbox binds alt+F4 on the root (a passive grab): the chord would close the window."""

    async def body() -> tuple[Refusal | None, DispatchResult | None]:
        async with surface(notes) as s:
            obs = await observe(s)
            return await act(s, obs, ActionKind.HOTKEY, keys=("alt", "f4"))

    reason, message = refused(asyncio.run(body()))
    assert reason == "FOCUS_MISMATCH" and "passive grab" in message and "the root window" in message, message
    assert notes.proc is not None and notes.proc.poll() is None  # the window is still there
