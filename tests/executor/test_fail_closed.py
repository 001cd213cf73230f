"""With the authz sidecar gone, every write is refused and observing goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from handrail.executor import ExecutorClient, Outcome
from handrail.scenarios import SubscriptionApp
from tests.conftest import new_stack


@pytest.mark.slow
@pytest.mark.browser
def test_authz_down_refuses_writes_but_observe_works(tmp_path: Path, app: SubscriptionApp) -> None:
    gen = new_stack(tmp_path)
    stack = next(gen)
    try:
        agent = stack.add_principal("agent")
        with stack.operator_client() as ops:
            ops.grant(agent.name, "browser:fc", ["submit", "navigate"], [app.url])
        with ExecutorClient(stack.executor.address, agent.token) as client:
            session = client.open_session(target="browser:fc", start_url=app.url + "/")
            session.observe()
            stack.authz.kill()  # kill -9: no goodbye
            obs = session.observe()
            assert "Pause plan" in obs.snapshot
            r = session.click(session.find("button", "Pause plan"))
            assert r.result.outcome is Outcome.REFUSED
            assert r.result.reason == "AUTHZ_UNAVAILABLE"
            assert not r.result.execution_started
            assert app.state()["requests"].get("POST /pause", 0) == 0
    finally:
        gen.close()
