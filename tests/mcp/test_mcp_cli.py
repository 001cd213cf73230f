"""``handrail mcp``'s command line: an operator's mistake is one line and exit code 2."""

from __future__ import annotations

import pytest

from handrail.cli import main


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
