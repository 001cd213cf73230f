"""Recorded tool calls of each vendor (tests/adapters/recorded/, written from the vendors'
documented schemas: each file says where from) translate into the guarded actions they
mean. The session here is a recorder of the SDK calls the adapters make (what reaches the
executor is checked against the fixture app in test_adapters_live.py)."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from handrail.adapters import AnthropicComputer, GeminiComputer, GuardedComputer, OpenAIComputer, playwright_keys
from handrail.executor import ActionKind, ActionResult, ActResponse, Element, Evidence, Observation, Outcome

RECORDED = Path(__file__).parent / "recorded"


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(out, format="PNG")
    return out.getvalue()


class Recorder:
    """Stands in for ``handrail.executor.Session``: records each act, answers DONE."""

    def __init__(self, focused: str = "") -> None:
        self.acts: list[tuple[ActionKind, dict[str, Any]]] = []
        self.gen = itertools.count(1)
        self.focused = focused
        self.latest: Observation | None = None
        self.observe()

    def observe(self, *, screenshot: bool = False, screenshot_scale: float = 0.0, **_: Any) -> Observation:
        scale = screenshot_scale or 1.0
        elements = (Element("e5", "textbox", "Email", "t1", "", focused=True),) if self.focused else ()
        self.latest = Observation(
            f"s:{next(self.gen)}", "s", 1, 1, "http://app/", "", "", "", 0,
            screenshot_png=_png(round(1280 * scale), round(800 * scale)) if screenshot else b"",
            screenshot_scale=scale, viewport_width=1280, viewport_height=800, elements=elements,
        )  # fmt: skip
        return self.latest

    def act(self, kind: ActionKind, **kw: Any) -> ActResponse:
        self.acts.append((kind, kw))
        done = ActionResult(
            "a", Outcome.DONE, "", "done", True, Evidence.DISPATCH_RETURNED, kw.get("idempotency_key", "k")
        )
        return ActResponse(done)


def _matches(act: tuple[ActionKind, dict[str, Any]], expect: dict[str, Any]) -> None:
    kind, kw = act
    assert kind.value == expect["kind"], (act, expect)
    for key, value in expect.items():
        if key == "kind":
            continue
        got = kw.get(key)
        got = list(got) if isinstance(got, tuple) else got
        assert got == value, (key, act, expect)


def _cases(vendor: str) -> list[dict[str, Any]]:
    return list(json.loads((RECORDED / f"{vendor}.json").read_text())["calls"])


def test_anthropic_calls_become_guarded_actions() -> None:
    session = Recorder()
    claude = AnthropicComputer(GuardedComputer(session), "computer_20250124", scale=0.8)  # type: ignore[arg-type]
    zooming = AnthropicComputer(GuardedComputer(session), "computer_20251124", scale=0.8)  # type: ignore[arg-type]
    assert claude.tool() == {"type": "computer_20250124", "name": "computer", "display_width_px": 1024,
                             "display_height_px": 640}  # fmt: skip
    claude.computer.cursor = (0, 0)
    for i, case in enumerate(_cases("anthropic")):
        before = len(session.acts)
        tool = zooming if case.get("version") == "computer_20251124" else claude
        result = tool.run({"type": "tool_use", "id": f"toolu_{i}", "name": "computer", "input": case["input"]})
        zooming.computer.cursor = claude.computer.cursor
        assert result["tool_use_id"] == f"toolu_{i}" and result["content"][-1]["type"] == "image", result
        assert bool(result.get("is_error")) == bool(case.get("error")), (case, result)
        if case.get("text"):
            assert result["content"][0]["text"] == case["text"]
        if case["expect"] is None:
            assert len(session.acts) == before, (case, session.acts[before:])
        else:
            assert len(session.acts) == before + 1, case
            _matches(session.acts[-1], case["expect"])
        if case["input"]["action"] == "zoom" and not case.get("error"):
            data = result["content"][-1]["source"]["data"]
            import base64

            with Image.open(io.BytesIO(base64.b64decode(data))) as img:
                assert img.size == (125, 62)  # 100 x 50 screenshot pixels at full resolution


def test_anthropic_screenshots_fit_the_documented_limits() -> None:
    session = Recorder()
    claude = AnthropicComputer(GuardedComputer(session))  # type: ignore[arg-type]
    assert claude.computer.scale == 1.0  # 1280 x 800 is under 1568 px and 1.15 MP
    from handrail.adapters import vendor_scale

    assert vendor_scale(1920, 1080, 1568, 1_150_000) == pytest.approx(0.7447, abs=1e-3)  # 1.15 MP binds before 1568 px


def test_openai_actions_become_guarded_actions_and_a_batch_stops_at_a_failure() -> None:
    session = Recorder()
    openai = OpenAIComputer(GuardedComputer(session))  # type: ignore[arg-type]
    assert openai.tool() == {"type": "computer", "display_width": 1280, "display_height": 800, "environment": "browser"}
    for i, case in enumerate(_cases("openai")):
        before = len(session.acts)
        turn = openai.run({"type": "computer_call", "call_id": f"c{i}", "actions": [case["action"]]})
        assert turn.output["call_id"] == f"c{i}" and turn.output["output"]["image_url"].startswith("data:image/png")
        assert turn.ok != bool(case.get("error")), (case, turn)
        assert "acknowledged_safety_checks" not in turn.output
        if case["expect"] is None:
            assert len(session.acts) == before
        else:
            _matches(session.acts[-1], case["expect"])
    # A batch: text typed right after a click goes in at the click's point; a failing
    # action stops the batch.
    before = len(session.acts)
    batch = [{"type": "click", "x": 170, "y": 101}, {"type": "type", "text": "ada"}, {"type": "click", "button": "back",
             "x": 1, "y": 1}, {"type": "move", "x": 1, "y": 1}]  # fmt: skip
    turn = openai.run({"type": "computer_call", "call_id": "b", "actions": batch})
    assert not turn.ok and len(turn.steps) == 3
    kinds = [(k, kw.get("x"), kw.get("y"), kw.get("ref", "")) for k, kw in session.acts[before:]]
    assert kinds == [(ActionKind.CLICK, 170, 101, ""), (ActionKind.TYPE, 170, 101, "")], kinds


def test_typing_and_keys_cite_the_focused_field() -> None:
    session = Recorder(focused="e5")
    openai = OpenAIComputer(GuardedComputer(session))  # type: ignore[arg-type]
    openai.run({"type": "computer_call", "call_id": "c", "actions": [{"type": "type", "text": "x"},
                {"type": "keypress", "keys": ["ENTER"]}]})  # fmt: skip
    assert [(k, kw.get("ref")) for k, kw in session.acts] == [(ActionKind.TYPE, "e5"), (ActionKind.PRESS, "e5")]


def test_a_safety_check_asks_for_an_approval_on_every_write_of_its_call() -> None:
    session = Recorder()
    openai = OpenAIComputer(GuardedComputer(session, approval_wait_ms=1234))  # type: ignore[arg-type]
    check = {"id": "cu_sc_9", "code": "malicious_instructions", "message": "the page asks to cancel"}
    turn = openai.run({"type": "computer_call", "call_id": "c", "pending_safety_checks": [check],
                       "actions": [{"type": "move", "x": 1, "y": 1}, {"type": "click", "x": 1, "y": 1}]})  # fmt: skip
    asked = [(kw.get("approval_asked"), kw.get("approval_wait_ms")) for _, kw in session.acts]
    text = "openai pending_safety_check cu_sc_9 (malicious_instructions): the page asks to cancel"
    assert asked == [(text, 1234), (text, 1234)]
    # DONE with approval_asked means the sidecar allowed it with an operator's approval.
    assert turn.output["acknowledged_safety_checks"] == [check]
    session.acts.clear()
    openai.run({"type": "computer_call", "call_id": "d", "actions": [{"type": "click", "x": 1, "y": 1}]})
    assert "approval_asked" not in session.acts[0][1]  # the next call asks nothing


def test_gemini_calls_map_the_grid_to_the_viewport() -> None:
    session = Recorder()
    gemini = GeminiComputer(GuardedComputer(session))  # type: ignore[arg-type]
    for case in _cases("gemini"):
        before = len(session.acts)
        done = gemini.run({"name": case["name"], "args": case["args"]})
        assert done.response["name"] == case["name"] and done.response["parts"][0]["inline_data"]["data"]
        assert done.step.ok != bool(case.get("error")), (case, done.step)
        assert ("error" in done.response["response"]) == bool(case.get("error"))
        if case["expect"] is None:
            assert len(session.acts) == before, case
        else:
            _matches(session.acts[-1], case["expect"])
        if "intent" in case["args"]:
            assert case["args"]["intent"] in done.step.message


def test_gemini_confirmation_is_acknowledged_only_with_an_approval() -> None:
    session = Recorder()
    gemini = GeminiComputer(GuardedComputer(session))  # type: ignore[arg-type]
    call = {"name": "click_at", "args": {"x": 1, "y": 1, "safety_decision": {"decision": "require_confirmation",
            "explanation": "pays"}}}  # fmt: skip
    done = gemini.run(call)
    assert session.acts[-1][1]["approval_asked"] == "gemini safety_decision require_confirmation: pays"
    assert done.response["response"]["safety_acknowledgement"] == "true"
    done = gemini.run({"name": "click_at", "args": {"x": 1, "y": 1}})
    assert "safety_acknowledgement" not in done.response["response"]


@pytest.mark.parametrize(
    ("chord", "keys"),
    [("ctrl+s", ["Control", "S"]), ("Return", ["Enter"]), ("alt+Tab", ["Alt", "Tab"]), ("Page_Down", ["PageDown"]),
     ("super", ["Meta"]), (["CTRL", "SHIFT", "T"], ["Control", "Shift", "T"]), ("F5", ["F5"])],
)  # fmt: skip
def test_vendor_key_names_become_playwright_names(chord: str | list[str], keys: list[str]) -> None:
    assert playwright_keys(chord) == keys
