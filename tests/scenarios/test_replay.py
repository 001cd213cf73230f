"""The replay runner, the CLI, the pytest plugin and recording, on the real stack."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import pytest

from handrail.executor import Outcome
from handrail.scenarios import SubscriptionApp, _replay, load_scenario, parse_scenario, record_session, replay
from handrail.scenarios._cli import register
from tests.conftest import AgentSetup, Stack

pytestmark = [pytest.mark.slow, pytest.mark.browser]

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"

DIVERGING = """\
name: diverging
app: subscription
grants:
  - {id: cancel, verbs: [input, submit, navigate]}
steps:
  - observe
  - act:
      kind: click
      target: {role: button, name: Pause plan}
      expect: REFUSED STALE_REF
checks:
  state:
    - {field: paused, equals: true}
"""


def test_a_library_scenario_passes() -> None:
    report = replay(load_scenario(LIBRARY / "subscription-cancel-renewal.yaml"), repeat=1)
    assert report.passed, "\n".join([report.summary(), *report.details()])
    assert report.summary().startswith("subscription-cancel-renewal: pass^1 (1/1 runs passed")


def test_a_divergence_names_its_step(tmp_path: Path) -> None:
    report = replay(parse_scenario(DIVERGING, "diverging.yaml"), repeat=1, keep_dir=tmp_path)
    assert not report.passed
    (run,) = report.runs
    # a DONE result carries no reason
    assert run.divergences[0].startswith("step 2 act click button 'Pause plan': expected REFUSED STALE_REF, got DONE (")
    assert "FAIL pass^1 (0/1" in report.summary()
    assert (tmp_path / "run-1" / "ledger.sqlite").is_file()


def test_desktop_scenarios_are_skipped_without_a_display(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_replay, "display_unavailable", lambda: "missing Xvfb")
    report = replay(load_scenario(LIBRARY / "desktop-focus-stolen.yaml"), repeat=3)
    assert report.skipped == "needs an X display: missing Xvfb" and not report.runs
    assert "SKIPPED" in report.summary()


def _cli(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="handrail")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    out = io.StringIO()
    code: int = args.func(args, out)
    return code, out.getvalue()


def test_cli_replay_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("app: bakery\nsteps: [observe]\n")
    code, _ = _cli("replay", str(bad))
    assert code == 2
    assert f"{bad}:1: app:" in capsys.readouterr().err

    failing = tmp_path / "diverging.yaml"
    failing.write_text(DIVERGING)
    code, out = _cli("replay", str(failing), "--repeat", "1")
    assert code == 1
    assert "DIVERGED: step 2 act click button 'Pause plan'" in out
    assert "1 scenario(s): 0 pass^1, 1 failed, 0 skipped" in out


def test_record_then_replay(stack: Stack, agent: AgentSetup, app: SubscriptionApp, tmp_path: Path) -> None:
    with stack.operator_client() as operator:
        operator.grant(agent.principal.name, agent.target, ["input", "submit", "navigate"], [app.url])
    session = agent.client.open_session(target=agent.target, start_url=app.url + "/")
    session.observe()
    assert session.navigate("http://127.0.0.1:9/elsewhere").result.reason == "OUT_OF_SCOPE"
    assert session.click(session.find("button", "Delete account")).result.reason == "POLICY_FORBID"
    first = session.click(session.find("button", "Turn off auto-renew")).result
    assert first.outcome is Outcome.DONE
    second = session.click(session.find("button", "No thanks, turn off renewal")).result
    assert second.outcome is Outcome.DONE
    session.close()

    text = record_session(
        stack.data_dir / "ledger.sqlite",
        session.session_id,
        fixture="subscription",
        name="recorded-cancel",
        state_url=app.url + "/state",
    )
    path = tmp_path / "scenarios" / "recorded-cancel.yaml"
    path.parent.mkdir()
    path.write_text(text)
    scenario = load_scenario(path)
    assert [s for s in scenario.steps if "act" in type(s).model_fields].__len__() == 4
    assert "auto_renew" in text and "POST /cancel-renewal" in text

    report = replay(scenario, repeat=1)
    assert report.passed, "\n".join([text, report.summary(), *report.details()])


def test_pytest_plugin(tmp_path: Path) -> None:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "cancel.yaml").write_text((LIBRARY / "subscription-cancel-renewal.yaml").read_text())
    (folder / "diverging.yaml").write_text(DIVERGING)
    (folder / "broken.yaml").write_text("app: subscription\nsteps:\n  - fault: explode\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "handrail.scenarios.pytest_plugin",
            "-p",
            "no:cacheprovider",
            "--scenario-repeat",
            "1",
            "--continue-on-collection-errors",
            "-q",
            str(folder),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout
    assert done.returncode == 1, out
    assert "1 failed, 1 passed, 1 error" in out
    assert "broken.yaml:3: steps[0].fault: unknown fault 'explode'" in out
    assert "scenario diverging diverged" in out
    assert "step 2 act click button 'Pause plan': expected REFUSED STALE_REF, got DONE" in out
    assert "handrail scenarios (pass^K)" in out
    assert "cancel: pass^1 (1/1 runs passed" in out
