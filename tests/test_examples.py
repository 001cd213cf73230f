"""The example agent under examples/ runs against a real stack and does its job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
