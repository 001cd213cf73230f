"""The example agent under examples/ runs against a real stack and does its job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from handrail.executor import ExecutorClient
from handrail.scenarios import SubscriptionApp
from tests.conftest import AgentSetup, Stack

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.browser
def test_example_agent_turns_off_the_renewal(stack: Stack, agent: AgentSetup, app: SubscriptionApp) -> None:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["submit", "navigate"], [app.url])
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "cancel_renewal_agent.py"),
            "--executor",
            stack.executor.address,
            f"--token={agent.principal.token}",  # a token may begin with "-"
            "--target",
            agent.target,
            "--url",
            app.url + "/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "auto-renew is off" in out.stdout
    state = app.state()
    assert state["auto_renew"] is False and not state["discount_accepted"]
    assert state["requests"]["POST /cancel-renewal"] == 1


@pytest.mark.browser
@pytest.mark.parametrize("case", ["no grant", "another agent holds the target", "a bad token"])
def test_example_agent_handles_refusals_without_a_traceback(stack: Stack, app: SubscriptionApp, case: str) -> None:
    agent = stack.add_principal("agent", "example")
    target = f"browser:{agent.name}"
    token = agent.token
    holder_client = None
    if case == "another agent holds the target":
        holder = stack.add_principal("agent", "holder")
        with stack.operator_client() as ops:
            ops.grant(holder.name, target, ["submit", "navigate"], [app.url])
        holder_client = ExecutorClient(stack.executor.address, holder.token)
        holder_client.open_session(target=target, start_url=app.url + "/")
    elif case == "a bad token":
        token = "not-a-token"
    try:
        out = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "cancel_renewal_agent.py"), "--executor", stack.executor.address,
             f"--token={token}", "--target", target, "--url", app.url + "/"],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        if holder_client is not None:
            holder_client.close()
    assert out.returncode in (2, 3), out.stdout + out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert app.state()["requests"].get("POST /cancel-renewal", 0) == 0
