"""The vendor example loops (examples/computer_use/) replay their recorded conversations
against the plans fixture app through a real stack, and complete their tasks; a safety check
is acknowledged only after an operator approved the action it covers."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handrail.scenarios import PlansApp
from tests.conftest import AgentSetup, Stack

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def plans() -> Iterator[PlansApp]:
    with PlansApp() as app:
        yield app


class Operator(threading.Thread):
    """Approves every pending approval of one agent, and counts them."""

    def __init__(self, stack: Stack, agent: str) -> None:
        super().__init__(daemon=True)
        self.stack, self.agent = stack, agent
        self.approved: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        with self.stack.operator_client() as ops:
            while not self.done.is_set():
                for a in ops.list_approvals(status="pending", principal=self.agent):
                    ops.approve(a.approval_id, note="checked by the test's operator")
                    self.approved.append(a.approval_id)
                time.sleep(0.1)


def _run(stack: Stack, agent: AgentSetup, app: PlansApp, vendor: str, operator: bool) -> tuple[str, list[str]]:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["input", "submit", "navigate"], [app.url])
    approver = Operator(stack, agent.principal.name)
    if operator:
        approver.start()
    try:
        out = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "computer_use" / f"{vendor}_loop.py"),
                "--executor",
                stack.executor.address,
                f"--token={agent.principal.token}",
                "--target",
                agent.target,
                "--url",
                app.url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
    finally:
        approver.done.set()
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout, approver.approved


def test_the_claude_loop_sets_the_email(stack: Stack, agent: AgentSetup, plans: PlansApp) -> None:
    stdout, _ = _run(stack, agent, plans, "anthropic", operator=False)
    assert "zoom" in stdout and "ERROR" not in stdout, stdout
    time.sleep(0.3)
    assert plans.state()["profile"]["email"] == "ada@example.com", stdout


def test_the_openai_loop_cancels_plan_e_once_an_operator_approved(
    stack: Stack, agent: AgentSetup, plans: PlansApp
) -> None:
    stdout, approved = _run(stack, agent, plans, "openai", operator=True)
    assert "acknowledged cu_sc_01" in stdout, stdout
    assert len(approved) == 2, approved  # the move and the click: each its own approval
    deadline = time.monotonic() + 2
    while plans.cancelled() != ["E"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert plans.cancelled() == ["E"], stdout


def test_the_gemini_loop_pauses_the_plan_and_sets_the_email(stack: Stack, agent: AgentSetup, plans: PlansApp) -> None:
    stdout, approved = _run(stack, agent, plans, "gemini", operator=True)
    assert "(acknowledged)" in stdout and len(approved) == 1, stdout
    time.sleep(0.3)
    state = plans.state()
    assert state["paused"] is True and state["profile"]["email"] == "ada@example.com", (stdout, state)
