"""The desktop executor end to end: an agent over gRPC, the executor and authz processes,
real Tk windows on Xvfb; the fixtures' own state says what really arrived."""

from __future__ import annotations

import io
import subprocess
import time

import pytest
from PIL import Image

from handrail.executor import DesktopTarget, Outcome, Session
from handrail.recorder import Ledger
from handrail.scenarios._tkapps import COLOURS, NOTES_LAYOUT, TkApp
from handrail.scenarios._x11 import connect
from tests.conftest import Stack
from tests.desktop.attackers import Attacker
from tests.desktop.conftest import DesktopAgent, activate, steal_while_typing, unique_title

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


def open_on(agent: DesktopAgent, app: TkApp) -> Session:
    activate(app)
    session = agent.client.open_session(target=agent.target, desktop=DesktopTarget(window_id=app.window_id()))
    session.observe()
    return session


def ledger_result(stack: Stack, action_id: str) -> dict[str, object]:
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        results = ledger.entries(action_id=action_id, kind="result")
    assert len(results) == 1
    return results[0].body


def test_typing_reaches_the_target(desktop_agent: DesktopAgent, notes: TkApp) -> None:
    session = open_on(desktop_agent, notes)
    text = "Dear team, héllo ü€ 中 — see you"
    response = session.type(text, expect_text=notes.title)
    r = response.result
    assert r.outcome is Outcome.DONE and r.typed_chars == len(text), r
    assert r.evidence.value == "VERIFIED"  # the expectation is checked against the title
    assert response.observation is not None and response.observation.desktop is not None
    assert notes.wait_state(lambda st: st["text"] == text)["text"] == text
    session.close()


def test_focus_grabbed_between_observe_and_act_is_refused(
    desktop_agent: DesktopAgent, notes: TkApp, thief: TkApp
) -> None:
    session = open_on(desktop_agent, notes)
    session.observe()
    thief.command("steal")
    thief.wait_state(lambda st: st["stole"])
    time.sleep(0.1)
    r = session.type("password123").result
    assert r.outcome is Outcome.REFUSED and r.reason == "FOCUS_MISMATCH" and not r.execution_started, r
    assert thief.title in r.message
    assert notes.settled_state()["text"] == ""
    assert thief.settled_state()["text"] == ""
    session.close()


def test_focus_stolen_halfway_stops_typing_and_the_ledger_says_how_much(
    desktop_stack: Stack, desktop_agent: DesktopAgent, notes: TkApp, thief: TkApp
) -> None:
    session = open_on(desktop_agent, notes)
    text = "Quarterly figures look fine; shipping the report to finance today. " * 4
    watcher = steal_while_typing(notes, thief)
    r = session.type(text, key_delay_ms=4, timeout_ms=30_000).result
    watcher.join(10)
    assert r.outcome is Outcome.FAILED and r.reason == "FOCUS_MISMATCH" and r.execution_started, r
    assert 0 < r.typed_chars < len(text)
    assert f"after {r.typed_chars} of {len(text)} characters" in r.message
    body = ledger_result(desktop_stack, r.action_id)
    assert body["extra"]["typed_chars"] == r.typed_chars  # type: ignore[index]
    got = notes.settled_state()["text"]
    stolen = thief.settled_state()["text"]
    assert stolen == "" and got == text[: r.typed_chars], (got, stolen)  # nothing in flight lands outside
    session.close()


@pytest.mark.parametrize("change", ["move 260 180", "resize 420 330"])
def test_a_moved_or_resized_target_is_refused(desktop_agent: DesktopAgent, notes: TkApp, change: str) -> None:
    session = open_on(desktop_agent, notes)
    notes.command(change)
    time.sleep(0.3)
    x, y, w, h = NOTES_LAYOUT["red"]
    r = session.click(x=x + w // 2, y=y + h // 2).result
    assert r.outcome is Outcome.REFUSED and r.reason == "TARGET_CHANGED" and not r.execution_started, r
    assert notes.settled_state()["clicks"] == []
    session.close()


def test_a_click_at_a_scaled_screenshots_point_hits_that_widget(desktop_agent: DesktopAgent, notes: TkApp) -> None:
    session = open_on(desktop_agent, notes)
    obs = session.observe(screenshot=True, screenshot_scale=0.5)
    image = Image.open(io.BytesIO(obs.screenshot_png)).convert("RGB")
    assert image.size == (240, 180)
    green = tuple(int(COLOURS["green"][i : i + 2], 16) for i in (1, 3, 5))
    hits = [
        (px, py)
        for py in range(image.height)
        for px in range(image.width)
        if all(abs(a - b) < 40 for a, b in zip(image.getpixel((px, py)), green, strict=True))  # type: ignore[arg-type]
    ]
    px, py = sum(p[0] for p in hits) // len(hits), sum(p[1] for p in hits) // len(hits)
    r = session.click(x=px, y=py).result
    assert r.outcome is Outcome.DONE, r
    clicks = notes.wait_state(lambda st: bool(st["clicks"]))["clicks"]
    assert [c["widget"] for c in clicks] == ["green"]
    session.close()


def test_a_person_at_the_desk_pauses_the_agent(
    desktop_agent: DesktopAgent, desktop_stack: Stack, notes: TkApp, xdisplay: str
) -> None:
    session = open_on(desktop_agent, notes)
    assert session.type("agent ").result.outcome is Outcome.DONE
    subprocess.run(["xdotool", "type", "--delay", "5", "human"], env={"DISPLAY": xdisplay}, check=True)
    time.sleep(0.3)
    r = session.type("more").result
    assert r.outcome is Outcome.REFUSED and r.reason == "HELD_BY_HUMAN" and not r.execution_started, r
    assert notes.settled_state()["text"] == "agent human"
    # The executor told the sidecar: the lease is a person's now, and stays so on observe.
    with desktop_stack.operator_client() as ops:
        lease = ops.get_lease(desktop_agent.target)
        assert (lease.holder_kind, lease.holder) == ("human", f"desk:{desktop_agent.target}")
        session.observe()
        again = session.type("more").result
        assert (again.outcome, again.reason) == (Outcome.REFUSED, "HELD_BY_HUMAN"), again
        # Once the person hands the desk back, the agent looks again and goes on.
        ops.hand_back(desktop_agent.target, lease.epoch, next_holder=desktop_agent.principal.name)
    session.observe()
    assert session.type("!").result.outcome is Outcome.DONE
    assert notes.wait_state(lambda st: st["text"] == "agent human!")["text"] == "agent human!"
    session.close()


def test_activate_brings_the_target_back(desktop_agent: DesktopAgent, notes: TkApp, thief: TkApp) -> None:
    session = open_on(desktop_agent, notes)
    thief.command("steal")
    thief.wait_state(lambda st: st["stole"])
    time.sleep(0.1)
    obs = session.observe()
    assert obs.desktop is not None and obs.desktop.active is not None
    assert obs.desktop.active.window_id == thief.window_id()
    response = session.activate()
    assert response.result.outcome is Outcome.DONE, response.result
    assert response.observation is not None and response.observation.desktop is not None
    active = response.observation.desktop.active
    assert active is not None and active.window_id == notes.window_id()
    assert session.type("back").result.outcome is Outcome.DONE
    assert notes.wait_state(lambda st: st["text"] == "back")["text"] == "back"
    assert thief.settled_state()["text"] == ""
    session.close()


def test_a_destroyed_target_ends_the_session_for_good(desktop_agent: DesktopAgent, xdisplay: str) -> None:
    """Closed and replaced by a look-alike with a new id: TARGET_GONE, observe says so, no retry."""
    from handrail.executor import ExecutorError, ExecutorRpcError, ExecutorUnavailableError, TargetGoneError

    title = unique_title("Doomed")
    app = TkApp("notes", xdisplay, title=title).start()
    try:
        session = open_on(desktop_agent, app)
        wid = app.window_id()
        app.command("quit")
        with connect(xdisplay) as x:
            deadline = time.monotonic() + 5
            while x.exists(wid) and time.monotonic() < deadline:
                time.sleep(0.02)
        with Attacker("impostor", xdisplay, "--title", title) as impostor:
            r = session.type("password123").result
            with pytest.raises(ExecutorError) as raised:
                session.observe()
            log = impostor.stop()
    finally:
        app.stop()
    assert log["keys"] == 0, log
    assert r.outcome is Outcome.REFUSED and r.reason == "TARGET_GONE" and not r.execution_started, r
    assert "destroyed" in r.message and "open a new one" in r.message, r.message
    error = raised.value
    assert error.reason == "TARGET_GONE" and not isinstance(error, ExecutorUnavailableError), repr(error)
    assert isinstance(error, ExecutorRpcError) and error.code_name == "FAILED_PRECONDITION"
    assert isinstance(error, TargetGoneError), repr(error)
    with pytest.raises(ExecutorError) as refused:
        session.strict = True
        session.type("again")
    assert type(refused.value).__name__ == "TargetGoneRefusedError" and refused.value.reason == "TARGET_GONE"


def test_a_withdrawn_target_replaced_by_another_window_is_target_changed(
    desktop_agent: DesktopAgent, notes: TkApp, xdisplay: str
) -> None:
    session = open_on(desktop_agent, notes)
    notes.command("withdraw")
    with Attacker("impostor", xdisplay, "--title", notes.title) as impostor:
        x, y, w, h = NOTES_LAYOUT["red"]
        r = session.click(x=x + w // 2, y=y + h // 2).result
        log = impostor.stop()
    assert log["buttons"] == 0, log
    assert r.outcome is Outcome.REFUSED and r.reason == "TARGET_CHANGED" and "not on screen" in r.message, r
    session.close()


def test_type_and_press_need_no_ref_on_the_desktop(desktop_agent: DesktopAgent, notes: TkApp) -> None:
    session = open_on(desktop_agent, notes)
    assert session.type("hello").result.outcome is Outcome.DONE
    assert session.press("BackSpace").result.outcome is Outcome.DONE
    assert session.press("enter").result.outcome is Outcome.DONE
    assert notes.wait_state(lambda st: st["text"] == "hell\n")["text"] == "hell\n"
    session.close()
