"""The desktop backend on its own: real Xvfb, openbox and Tk windows, no executor process."""

from __future__ import annotations

import asyncio
import io
import subprocess

import pytest
from PIL import Image

from handrail.executor._backend import DispatchStatus
from handrail.executor._errors import BackendError
from handrail.executor._models import (
    ActionKind,
    ActionSpec,
    DesktopTarget,
    Expectation,
    Observation,
    Reason,
    WaitFor,
)
from handrail.executor.desktop import X11, Keyboard, bind_window, open_desktop
from handrail.scenarios._tkapps import COLOURS, NOTES_LAYOUT, TkApp
from tests.desktop.conftest import activate, observe, steal_while_typing, surface, unique_title

pytestmark = pytest.mark.desktop


def spec(obs: Observation, kind: ActionKind, **kw: object) -> ActionSpec:
    return ActionSpec(kind=kind, observation_id=obs.observation_id, idempotency_key="k", **kw)  # type: ignore[arg-type]


def centre(name: str) -> tuple[int, int]:
    x, y, w, h = NOTES_LAYOUT[name]
    return x + w // 2, y + h // 2


def test_binds_exactly_one_window_and_lists_candidates(notes: TkApp, xdisplay: str) -> None:
    x = X11(xdisplay)
    try:
        wid = notes.window_id()
        assert bind_window(x, DesktopTarget(title_pattern=f"^{notes.title}$")) == wid
        # Tk sets no _NET_WM_PID: the pid comes from the X-Resource extension.
        assert bind_window(x, DesktopTarget(pid=notes.pid)) == wid
        assert bind_window(x, DesktopTarget(wm_class="handrailnotes", pid=notes.pid)) == wid
        with TkApp("notes", xdisplay, title=unique_title("Notes")) as other:
            other.window_id()
            with pytest.raises(BackendError, match=r"2 windows .* match WM_CLASS 'Handrailnotes'"):
                bind_window(x, DesktopTarget(wm_class="Handrailnotes"))
        with pytest.raises(BackendError, match=r"no window on .* matches title /nothing like this/; windows: .*Notes"):
            bind_window(x, DesktopTarget(title_pattern="nothing like this"))
    finally:
        x.close()


def test_observation_describes_target_active_window_and_stacking(notes: TkApp) -> None:
    async def body() -> None:
        async with surface(notes) as s:
            obs = await observe(s, screenshot=True, scale=0.5)
            d = obs.desktop
            assert d is not None
            assert (d.screen_width, d.screen_height) == (1280, 800)
            assert d.target.window_id == notes.window_id()
            assert d.target.pid == notes.pid
            assert d.target.wm_class == "Handrailnotes"
            assert d.target.title == notes.title == obs.title
            assert (d.target.width, d.target.height) == (480, 360)
            assert d.active is not None and d.active.window_id == d.target.window_id
            assert d.stacking[-1].window_id == d.target.window_id  # active on top
            assert d.screenshot_of_target and (d.screenshot_x, d.screenshot_y) == (d.target.x, d.target.y)
            image = Image.open(io.BytesIO(obs.screenshot_png))
            assert image.size == (240, 180) and obs.screenshot_scale == 0.5
            assert "[target, active]" in obs.snapshot

    asyncio.run(body())


def test_typing_non_ascii_arrives_intact_and_the_keymap_is_restored(notes: TkApp, xdisplay: str) -> None:
    text = "héllo ü€ 中 Ωmega — ok"

    async def body() -> None:
        async with surface(notes) as s:
            obs = await observe(s)
            typing = spec(obs, ActionKind.TYPE, text=text)
            assert await s.check_fresh(obs, typing, None) is None
            result = await s.dispatch(typing, 5_000)
            assert result.status is DispatchStatus.DONE and result.typed_chars == len(text)
            await asyncio.sleep(0.5)  # the borrowed keycodes are given back after a pause

    asyncio.run(body())
    assert notes.wait_state(lambda st: st["text"] == text)["text"] == text
    x = X11(xdisplay)
    try:
        kb = Keyboard(x)
        assert kb.missing({"中", "€"}) == {"中", "€"}  # not left in the keymap
    finally:
        x.close()


def test_a_window_that_takes_the_focus_refuses_input_and_nothing_is_typed(notes: TkApp, thief: TkApp) -> None:
    async def body() -> None:
        async with surface(notes) as s:
            obs = await observe(s)
            thief.command("steal")
            thief.wait_state(lambda st: st["stole"])
            await asyncio.sleep(0.1)
            refusal = await s.check_fresh(obs, spec(obs, ActionKind.TYPE, text="secret"), None)
            assert refusal is not None and refusal.reason == Reason.FOCUS_MISMATCH
            assert thief.title in refusal.message
            # Even past the check, dispatch re-checks before the first key.
            s._cited = obs
            result = await s.dispatch(spec(obs, ActionKind.TYPE, text="secret"), 5_000)
            assert result.status is DispatchStatus.NOT_STARTED and result.reason == Reason.FOCUS_MISMATCH

    asyncio.run(body())
    assert notes.settled_state()["text"] == ""
    assert thief.settled_state()["text"] == ""


def test_focus_stolen_while_typing_stops_and_counts(notes: TkApp, thief: TkApp) -> None:
    text = "the quick brown fox jumps over the lazy dog " * 6

    async def body() -> int:
        async with surface(notes) as s:
            obs = await observe(s)
            typing = spec(obs, ActionKind.TYPE, text=text, key_delay_ms=4)
            assert await s.check_fresh(obs, typing, None) is None
            watcher = steal_while_typing(notes, thief)
            result = await s.dispatch(typing, 20_000)
            watcher.join(10)
            assert result.status is DispatchStatus.PARTIAL, result
            # The check names the thief, or (caught mid-switch) says no window is active.
            named = thief.title in result.message or "the active window is no window" in result.message
            assert result.reason == Reason.FOCUS_MISMATCH and named, result
            assert 0 < result.typed_chars < len(text)
            return result.typed_chars

    typed = asyncio.run(body())
    got = notes.settled_state()["text"]
    stolen = thief.settled_state()["text"]
    # Each character was checked and sent under one server grab: the one "in flight" as
    # the focus moved does not exist. Every character counted reached the target, and
    # nothing reached the thief.
    assert stolen == "", f"the thief received {stolen!r}"
    assert got == text[:typed]


@pytest.mark.parametrize("change", ["move 300 200", "resize 400 300"])
def test_a_moved_or_resized_target_is_refused(notes: TkApp, change: str) -> None:
    async def body() -> None:
        async with surface(notes) as s:
            obs = await observe(s)
            notes.command(change)
            await asyncio.sleep(0.3)
            click = spec(obs, ActionKind.CLICK, x=20, y=20)
            refusal = await s.check_fresh(obs, click, None)
            assert refusal is not None and refusal.reason == Reason.TARGET_CHANGED, refusal
            assert ("moved" if change.startswith("move") else "resized") in refusal.message
            fresh = await observe(s)
            assert await s.check_fresh(fresh, spec(fresh, ActionKind.CLICK, x=20, y=20), None) is None

    asyncio.run(body())


def test_a_point_outside_the_client_area_or_under_another_window_is_refused(notes: TkApp, xdisplay: str) -> None:
    async def body() -> None:
        async with surface(notes) as s:
            obs = await observe(s)
            outside = await s.check_fresh(obs, spec(obs, ActionKind.CLICK, x=500, y=20), None)
            assert outside is not None and outside.reason == Reason.TARGET_CHANGED and "outside" in outside.message
            assert d_target(obs) == (480, 360)
            # An override-redirect popup (a tooltip, a notification) over the red button.
            x = X11(xdisplay)
            try:
                d = obs.desktop
                assert d is not None
                rx, ry = centre("red")
                popup = x.root.create_window(
                    d.target.x + rx - 20, d.target.y + ry - 20, 40, 40, 0, 0, override_redirect=True
                )
                popup.map()
                x.sync()
                covered = await s.check_fresh(obs, spec(obs, ActionKind.CLICK, x=rx, y=ry), None)
                assert covered is not None and covered.reason == Reason.FOCUS_MISMATCH and "covers" in covered.message
                gx, gy = centre("green")
                assert await s.check_fresh(obs, spec(obs, ActionKind.CLICK, x=gx, y=gy), None) is None
                popup.destroy()
                x.sync()
            finally:
                x.close()

    asyncio.run(body())


def d_target(obs: Observation) -> tuple[int, int]:
    assert obs.desktop is not None
    return obs.desktop.target.width, obs.desktop.target.height


def test_a_scaled_screenshots_coordinates_map_back(notes: TkApp) -> None:
    async def body() -> tuple[int, int]:
        async with surface(notes) as s:
            obs = await observe(s, screenshot=True, scale=0.4)
            # Find the blue button by its colour in the scaled PNG, as an agent would.
            image = Image.open(io.BytesIO(obs.screenshot_png)).convert("RGB")
            blue = tuple(int(COLOURS["blue"][i : i + 2], 16) for i in (1, 3, 5))
            hits = [
                (px, py)
                for py in range(image.height)
                for px in range(image.width)
                if all(abs(a - b) < 40 for a, b in zip(image.getpixel((px, py)), blue, strict=True))  # type: ignore[arg-type]
            ]
            assert hits
            px = sum(p[0] for p in hits) // len(hits)
            py = sum(p[1] for p in hits) // len(hits)
            click = spec(obs, ActionKind.CLICK, x=px, y=py)
            assert await s.check_fresh(obs, click, None) is None
            assert (await s.dispatch(click, 5_000)).status is DispatchStatus.DONE
            return px, py

    asyncio.run(body())
    clicks = notes.wait_state(lambda st: bool(st["clicks"]))["clicks"]
    assert [c["widget"] for c in clicks] == ["blue"]
    _x, _y, w, h = NOTES_LAYOUT["blue"]
    assert abs(clicks[0]["x"] - w // 2) <= 4 and abs(clicks[0]["y"] - h // 2) <= 4


def test_pointer_and_key_actions(notes: TkApp) -> None:
    async def body() -> None:
        async with surface(notes) as s:
            obs = await observe(s)
            px, py, _, _ = NOTES_LAYOUT["pad"]
            actions = [
                spec(obs, ActionKind.DOUBLE_CLICK, x=px + 30, y=py + 30),
                spec(obs, ActionKind.DRAG, x=px + 50, y=py + 20, to_x=px + 200, to_y=py + 80),
                spec(obs, ActionKind.CLICK, x=px + 10, y=py + 10, button="right"),
                spec(obs, ActionKind.SCROLL, x=px + 10, y=py + 10, delta_y=2),
                spec(obs, ActionKind.TYPE, text="abc"),
                spec(obs, ActionKind.PRESS, key="BackSpace"),
                spec(obs, ActionKind.HOTKEY, keys=("shift", "x")),
            ]
            for a in actions:
                assert await s.check_fresh(obs, a, None) is None, a.kind
                r = await s.dispatch(a, 5_000)
                assert r.status is DispatchStatus.DONE, (a.kind, r)
            bad = spec(obs, ActionKind.PRESS, key="NoSuchKey")
            r = await s.dispatch(bad, 5_000)
            assert r.status is DispatchStatus.NOT_STARTED and "unknown key" in r.message

    asyncio.run(body())
    state = notes.wait_state(lambda st: st["text"] == "abX" and len(st["pad"]) >= 10)
    assert state["text"] == "abX"
    events = [(e["event"], e["num"]) for e in state["pad"]]
    # Tk runs the more specific <Double-Button-1> binding instead of <ButtonPress> for the second press.
    assert events[:4] == [("press", 1), ("release", 1), ("double", 1), ("release", 1)], state["pad"]
    drag = state["pad"][4:6]
    assert (drag[0]["x"], drag[0]["y"]) == (50, 20) and (drag[1]["x"], drag[1]["y"]) == (200, 80)
    assert ("press", 3) in events and ("press", 5) in events  # right button; wheel down


def test_a_person_at_the_desk_pauses_the_agent(notes: TkApp, xdisplay: str) -> None:
    reports: list[str] = []

    async def report(message: str) -> None:
        reports.append(message)

    async def body() -> None:
        async with surface(notes, on_human_activity=report) as s:
            obs = await observe(s)
            # The backend's own input is not a person.
            for a in (spec(obs, ActionKind.CLICK, x=20, y=20), spec(obs, ActionKind.TYPE, text="agent")):
                assert await s.check_fresh(obs, a, None) is None
                assert (await s.dispatch(a, 5_000)).status is DispatchStatus.DONE
            await asyncio.sleep(0.3)
            assert reports == []
            assert notes.settled_state()["text"] == "agent"
            # A person types (xdotool drives XTEST from another client, as a remote desk would).
            subprocess.run(["xdotool", "key", "--delay", "0", "x"], env={"DISPLAY": xdisplay}, check=True)
            for _ in range(100):
                if reports:
                    break
                await asyncio.sleep(0.02)
            assert reports and "a person used the keyboard" in reports[0]
            refusal = await s.check_fresh(obs, spec(obs, ActionKind.TYPE, text="more"), None)
            assert refusal is not None and refusal.reason == Reason.HELD_BY_HUMAN
            # Observing again is the agent looking at what the person did: it may go on.
            fresh = await observe(s)
            assert await s.check_fresh(fresh, spec(fresh, ActionKind.TYPE, text="more"), None) is None
            # A pointer move alone is caught even before the recording reports it.
            subprocess.run(["xdotool", "mousemove", "3", "3"], env={"DISPLAY": xdisplay}, check=True)
            refusal = await s.check_fresh(fresh, spec(fresh, ActionKind.CLICK, x=20, y=20), None)
            assert refusal is not None and refusal.reason == Reason.HELD_BY_HUMAN and "(3, 3)" in refusal.message

    asyncio.run(body())
    final = notes.settled_state()
    assert final["text"] == "agentx", final.get("log")


def test_wait_for_a_window_and_title_expectations(notes: TkApp, xdisplay: str) -> None:
    async def body() -> None:
        async with surface(notes) as s:
            obs = await observe(s)
            title = unique_title("Later")
            wait = spec(obs, ActionKind.WAIT_FOR, wait_for=WaitFor(window_title=f"^{title}$"))
            assert (await s.dispatch(wait, 200)).status is DispatchStatus.NOT_STARTED
            with TkApp("thief", xdisplay, title=title):
                assert (await s.dispatch(wait, 5_000)).status is DispatchStatus.DONE
            activate(notes)
            holds, _ = await s.expectation_holds(Expectation(text_visible="Notes", within_ms=100), {})
            assert holds
            holds, why = await s.expectation_holds(Expectation(text_visible="Invoice", within_ms=100), {})
            assert not holds and "does not show 'Invoice'" in why
            holds, why = await s.expectation_holds(Expectation(role="button", name="OK"), {})
            assert not holds and "title" in why

    asyncio.run(body())


def test_opening_needs_a_display_and_a_matching_window(notes: TkApp, xdisplay: str) -> None:
    async def body() -> None:
        with pytest.raises(BackendError, match="no window"):
            await open_desktop(DesktopTarget(display=xdisplay, title_pattern="^no such window$"))
        with pytest.raises(BackendError, match="cannot open X display"):
            await open_desktop(DesktopTarget(display=":399", title_pattern="x"))

    asyncio.run(body())
