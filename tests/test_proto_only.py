"""The client under examples/proto_only/, generated from the .proto files alone, completes a
session against a live stack: observe, fill, a refusal handled by its reason, click, an
error's ErrorInfo, close."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from handrail.scenarios import CheckoutApp
from tests.conftest import Stack

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "examples" / "proto_only" / "client.py"


@pytest.fixture
def checkout() -> Iterator[CheckoutApp]:
    app = CheckoutApp()
    app.start()
    try:
        yield app
    finally:
        app.stop()


def test_the_client_imports_no_handrail() -> None:
    text = CLIENT.read_text()
    assert "import handrail" not in text and "from handrail" not in text


@pytest.mark.browser
def test_proto_only_client_completes_a_session(stack: Stack, checkout: CheckoutApp) -> None:
    agent = stack.add_principal("agent", "proto-only")
    target = f"browser:{agent.name}"
    with stack.operator_client() as ops:
        ops.grant(agent.name, target, ["input", "submit", "navigate"], [checkout.url])
    out = subprocess.run(
        [sys.executable, str(CLIENT), "--executor", stack.executor.address, f"--token={agent.token}",
         "--target", target, "--url", checkout.url + "/"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd="/",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "fill citing an old observation: REFUSED STALE_OBSERVATION" in out.stdout
    assert "navigate elsewhere: REFUSED OUT_OF_SCOPE" in out.stdout
    assert "observe another session: NOT_FOUND reason=NOT_FOUND field=session_id" in out.stdout
    assert checkout.state()["requests"].get("POST /order") == 1
