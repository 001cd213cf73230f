"""The console's wheel on a desktop: frames of the bound window, and a person's input that
goes into that window only (real Tk windows on Xvfb, the executor and authz processes)."""

from __future__ import annotations

import asyncio
import io
import time

import pytest
from PIL import Image

from handrail.executor import ActionKind, ConsoleClient, DesktopTarget, HumanInput, Outcome
from handrail.recorder import Ledger
from handrail.scenarios._tkapps import COLOURS, TkApp
from tests.conftest import Stack
from tests.desktop.conftest import DesktopAgent, activate

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


def _green_centre(png: bytes) -> tuple[int, int]:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    green = tuple(int(COLOURS["green"][i : i + 2], 16) for i in (1, 3, 5))
    hits = [
        (px, py)
        for py in range(image.height)
        for px in range(image.width)
        if all(abs(a - b) < 40 for a, b in zip(image.getpixel((px, py)), green, strict=True))  # type: ignore[arg-type]
    ]
    return sum(p[0] for p in hits) // len(hits), sum(p[1] for p in hits) // len(hits)


def test_a_person_at_the_wheel_of_a_desktop_window(
    desktop_agent: DesktopAgent, desktop_stack: Stack, notes: TkApp, thief: TkApp
) -> None:
    activate(notes)
    session = desktop_agent.client.open_session(
        target=desktop_agent.target, desktop=DesktopTarget(window_id=notes.window_id())
    )
    session.observe()
    op = desktop_stack.operator
    with desktop_stack.operator_client() as ops:
        lease = ops.take_over(desktop_agent.target)

    async def go() -> dict[str, object]:
        client = ConsoleClient(desktop_stack.executor.address)
        sid = session.session_id
        out: dict[str, object] = {}
        frames = client.watch_screen(op.token, sid)
        frame = await asyncio.wait_for(frames.__anext__(), 10)
        await frames.aclose()
        out["frame"] = frame
        x, y = _green_centre(frame.image)  # a point of the frame, in client pixels (scale 1)
        out["click"] = await client.human_input(op.token, sid, HumanInput(ActionKind.CLICK, lease.epoch, x, y))
        out["type"] = await client.human_input(op.token, sid, HumanInput(ActionKind.TYPE, lease.epoch, text="hi"))
        # Another window takes the focus: the person's keys are refused, nothing typed.
        thief.command("steal")
        thief.wait_state(lambda st: st["stole"])
        time.sleep(0.2)
        out["stolen"] = await client.human_input(op.token, sid, HumanInput(ActionKind.TYPE, lease.epoch, text="secret"))
        await client.close()
        return out

    out = asyncio.run(go())
    frame = out["frame"]
    assert frame.mime_type == "image/png" and (frame.image_width, frame.image_height) == (480, 360)  # type: ignore[attr-defined]
    assert out["click"].outcome is Outcome.DONE, out["click"]  # type: ignore[attr-defined]
    assert out["type"].outcome is Outcome.DONE, out["type"]  # type: ignore[attr-defined]
    stolen = out["stolen"]
    assert (stolen.outcome, stolen.reason, stolen.execution_started) == (Outcome.FAILED, "FOCUS_MISMATCH", False)  # type: ignore[attr-defined]
    assert [c["widget"] for c in notes.wait_state(lambda st: bool(st["clicks"]))["clicks"]] == ["green"]
    assert notes.wait_state(lambda st: st["text"] == "hi")["text"] == "hi"
    assert thief.settled_state()["text"] == ""
    with Ledger(desktop_stack.data_dir / "ledger.sqlite") as ledger:
        mine = [e for e in ledger.entries(session_id=session.session_id) if e.principal == op.name]
    assert [(e.kind, e.principal_kind) for e in mine].count(("result", "human")) == 3
    session.close()
