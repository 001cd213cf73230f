"""The README's Python snippets run as they are written, against a live stack.

Each ```python block of README.md is extracted and run, with the addresses it names (the
executor at 127.0.0.1:7701, the page at http://127.0.0.1:8000/) pointed at the test's
executor and fixture app, and ``agent_token`` an agent's token that has a grant on the
target it opens (``navigate`` too: the start page is a document load, judged like any).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from handrail.scenarios import SubscriptionApp
from tests.conftest import Stack

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_the_readme_has_snippets() -> None:
    assert len(SNIPPETS) >= 2


@pytest.mark.browser
@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs(
    index: int, stack: Stack, app: SubscriptionApp, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = stack.add_principal("agent", "readme")
    target = f"browser:shop-{agent.name}"
    with stack.operator_client() as ops:
        ops.grant(agent.name, target, ["navigate", "submit"], [app.url])
    code = (
        SNIPPETS[index]
        .replace("127.0.0.1:7701", stack.executor.address)
        .replace("http://127.0.0.1:8000/", app.url + "/")
        .replace('"browser:shop"', repr(target))
    )
    exec(compile(code, f"README.md snippet {index + 1}", "exec"), {"agent_token": agent.token})
    requests = app.state()["requests"]
    if "Pause plan" in code:  # the non-strict snippet: the click went through and was DONE
        assert requests.get("POST /pause") == 1
        assert "DONE" in capsys.readouterr().out
    else:  # the strict one raised nothing: the offer the click asked for showed
        assert "refused" not in capsys.readouterr().out
