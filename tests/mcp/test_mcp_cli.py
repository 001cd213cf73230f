"""``handrail mcp``'s command line: an operator's mistake is one line and exit code 2; an
executor that does not answer at start is one line and exit code 1."""

from __future__ import annotations

import pytest

from handrail.cli import main
from handrail.mcp._cli import unreachable
from tests.conftest import Stack


def test_a_missing_token_or_target_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("HANDRAIL_AGENT_TOKEN", "HANDRAIL_TARGET"):
        monkeypatch.delenv(name, raising=False)
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert err == "handrail mcp: --token and --target required (or HANDRAIL_AGENT_TOKEN, HANDRAIL_TARGET)\n"
    assert main(["mcp", "--token", "t", "--target", "browser:x", "--approval-wait", "9999"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["mcp", "--token", "t", "--target", "browser:x", "--state-key", "too short"]) == 2
    assert capsys.readouterr().err == "handrail mcp: --state-key must be 32 characters or more\n"


def test_an_executor_that_does_not_answer_is_one_line_at_start(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing listens on port 1: said at start, not at the client's first tool call.
    args = ["mcp", "--executor", "127.0.0.1:1", "--token", "t", "--target", "browser:x", "--start-timeout", "1"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err == "handrail mcp: cannot reach the executor at 127.0.0.1:1 (is it running?)\n"
    # A running executor passes the same check.
    assert unreachable(stack.executor.address, 5) == ""
