"""Chromium's managed policy (no preloading) is checked before a browser host starts.

Without it a page's speculation rules make the browser fetch and run pages where the gate's
routes never apply (``test_attacks_egress.py`` shows what reaches the servers then)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from handrail.executor import BackendError
from handrail.executor.browser import BrowserHost, _policy
from handrail.executor.browser._policy import POLICY_DIR, POLICY_FILE, policy_problem


def test_this_machine_has_the_policy() -> None:
    # scripts/bootstrap.sh wrote it; every browser test relies on it
    assert policy_problem() is None
    assert (POLICY_DIR / POLICY_FILE).exists()


def test_a_missing_policy_says_what_to_write_and_where(tmp_path: Path) -> None:
    for directory in (tmp_path / "none", tmp_path):
        problem = policy_problem(directory)
        assert problem is not None and "\n" not in problem
        assert '{"NetworkPredictionOptions": 2}' in problem and str(directory / POLICY_FILE) in problem


def test_the_policy_in_any_file_of_the_directory_counts(tmp_path: Path) -> None:
    (tmp_path / "site.json").write_text('{"HomepageLocation": "x", "NetworkPredictionOptions": 2}')
    (tmp_path / "notes.txt").write_text("not a policy file")
    assert policy_problem(tmp_path) is None


@pytest.mark.parametrize(
    ("other", "said"),
    [
        ('{"NetworkPredictionOptions": 0}', "sets NetworkPredictionOptions to 0"),
        ('{"NetworkPredictionOptions": "2"}', "sets NetworkPredictionOptions to '2'"),
        ('{"NetworkPredictionOptions": 2', "cannot be read"),
        ("[2]", "is not a JSON object"),
    ],
)
def test_a_file_that_contradicts_it_or_cannot_be_read_is_named(tmp_path: Path, other: str, said: str) -> None:
    (tmp_path / POLICY_FILE).write_text('{"NetworkPredictionOptions": 2}')
    (tmp_path / "zz-site.json").write_text(other)
    problem = policy_problem(tmp_path)
    assert problem is not None and said in problem and str(tmp_path / "zz-site.json") in problem, problem


def test_a_browser_host_will_not_start_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_policy, "POLICY_DIR", tmp_path)
    with pytest.raises(BackendError, match="would preload pages past the gate") as raised:
        asyncio.run(BrowserHost().start())
    assert str(tmp_path / POLICY_FILE) in str(raised.value)
