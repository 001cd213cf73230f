"""The scenario schema: what loads, what does not, and where the error is."""

from __future__ import annotations

from pathlib import Path

import pytest

from handrail.scenarios import (
    FAULT_KINDS,
    REASONS,
    ActStep,
    FaultStep,
    ObserveStep,
    ReconcileStep,
    ScenarioError,
    dump_scenario,
    load_scenario,
    parse_scenario,
)

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"

GOOD = """\
name: tiny
app: subscription
grants:
  - id: cancel
    verbs: [input, submit]
steps:
  - observe
  - act:
      kind: click
      target: {role: button, name: Turn off auto-renew}
      idempotency_key: k1
      fault: {kind: drop_connection, path: /cancel-renewal}
      expect: UNKNOWN
  - fault: rerender
  - reconcile: {key: k1, verdict: HAPPENED}
  - wait: 0.5
  - check:
      - {requests: POST /cancel-renewal, equals: 1}
checks:
  state:
    - {field: auto_renew, equals: false}
"""


def _error(text: str, tmp_path: Path, name: str = "x.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    return str(caught.value)


def test_a_good_scenario_loads() -> None:
    s = parse_scenario(GOOD, "tiny.yaml")
    assert s.name == "tiny"
    assert [type(step) for step in s.steps] == [
        ObserveStep,
        ActStep,
        FaultStep,
        ReconcileStep,
        type(s.steps[4]),
        type(s.steps[5]),
    ]
    act = s.steps[1]
    assert isinstance(act, ActStep)
    assert act.act.expect.outcome == "UNKNOWN"
    assert act.act.fault is not None and act.act.fault.kind == "drop_connection"
    assert s.default_target == "browser:tiny"
    assert s.first_agent == "agent"
    assert s.faults() == ["drop_connection", "rerender"]


def test_expected_result_shorthand() -> None:
    s = parse_scenario(GOOD.replace("expect: UNKNOWN", "expect: REFUSED STALE_REF"), "t.yaml")
    act = s.steps[1]
    assert isinstance(act, ActStep)
    assert act.act.expect.outcome == "REFUSED"
    assert act.act.expect.reasons() == ("STALE_REF",)


def test_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    path = tmp_path / "my-scenario.yaml"
    path.write_text(GOOD.replace("name: tiny\n", ""))
    assert load_scenario(path).name == "my-scenario"


def test_missing_field_names_file_line_and_path(tmp_path: Path) -> None:
    text = GOOD.replace("      target: {role: button, name: Turn off auto-renew}\n", "")
    message = _error(text, tmp_path)
    assert message.startswith(f"{tmp_path / 'x.yaml'}:8: steps[1].act: ")
    assert "needs a target" in message


def test_a_grant_shorter_than_a_second_is_refused_at_its_line(tmp_path: Path) -> None:
    # the sidecar counts a grant's lifetime itself (ttl_ms), from one second up
    message = _error(
        GOOD.replace("    verbs: [input, submit]", "    verbs: [input, submit]\n    expires_in_s: 0.5"), tmp_path
    )
    assert message.startswith(f"{tmp_path / 'x.yaml'}:6: grants[0].expires_in_s: ")
    assert "at least 1 second" in message


def test_missing_required_field(tmp_path: Path) -> None:
    message = _error(
        GOOD.replace("  - reconcile: {key: k1, verdict: HAPPENED}", "  - reconcile: {verdict: HAPPENED}"), tmp_path
    )
    assert ":15: steps[3].reconcile.key: field required" in message


def test_bad_field(tmp_path: Path) -> None:
    message = _error(
        GOOD.replace("      idempotency_key: k1\n", "      idempotency_key: k1\n      colour: red\n"), tmp_path
    )
    assert ":12: steps[1].act.colour: extra inputs are not permitted" in message


def test_bad_type(tmp_path: Path) -> None:
    message = _error(GOOD.replace("name: Turn off auto-renew}", "name: [1, 2]}"), tmp_path)
    assert ":10: steps[1].act.target.name: input should be a valid string" in message


def test_unknown_fault(tmp_path: Path) -> None:
    message = _error(GOOD.replace("  - fault: rerender", "  - fault: explode"), tmp_path)
    assert ":14: steps[2].fault: unknown fault 'explode' (known: takeover," in message
    message = _error(GOOD.replace("  - fault: rerender", "  - fault: drop_connection"), tmp_path)
    assert ":14: steps[2].fault: the drop_connection fault rides on an act step" in message


def test_unknown_reason_and_outcome(tmp_path: Path) -> None:
    message = _error(GOOD.replace("expect: UNKNOWN", "expect: REFUSED TOO_SLOW"), tmp_path)
    assert ":13: steps[1].act.expect.reason: unknown reason 'TOO_SLOW' (known: ALLOW," in message
    message = _error(GOOD.replace("expect: UNKNOWN", "expect: MAYBE"), tmp_path)
    assert (
        ":13: steps[1].act.expect.outcome: input should be "
        "'REFUSED', 'DONE', 'FAILED', 'UNKNOWN', 'RECONCILED' or 'NONE'" in message
    )


def test_unknown_step_kind(tmp_path: Path) -> None:
    message = _error(GOOD.replace("  - wait: 0.5", "  - sleep: 0.5"), tmp_path)
    assert ":16: steps[4]: a step is a mapping with one key" in message


def test_references_are_checked(tmp_path: Path) -> None:
    text = GOOD.replace("{key: k1, verdict: HAPPENED}", "{key: k2, verdict: HAPPENED}")
    message = _error(text, tmp_path)
    assert ":15: steps[3].reconcile.key: no earlier act with key 'k2'" in message
    text = GOOD.replace("  - fault: rerender", "  - fault: {kind: revoke, grant: nope}")
    assert ":14: steps[2].fault.grant: no grant 'nope'" in _error(text, tmp_path)
    text = GOOD.replace("      idempotency_key: k1\n", "      idempotency_key: k1\n      observation: later\n")
    assert "steps[1].act.observation: no earlier observation labelled 'later'" in _error(text, tmp_path)


def test_several_problems_are_all_reported(tmp_path: Path) -> None:
    text = GOOD.replace("app: subscription", "app: bakery").replace("  - fault: rerender", "  - fault: explode")
    message = _error(text, tmp_path)
    lines = message.splitlines()
    assert len(lines) == 2
    assert ":2: app: " in lines[0]
    assert ":14: steps[2].fault" in lines[1]


def test_malformed_yaml(tmp_path: Path) -> None:
    message = _error("name: x\nsteps: [observe\n", tmp_path)
    assert message.startswith(f"{tmp_path / 'x.yaml'}:3: malformed YAML")
    assert "a scenario is a mapping" in _error("- just\n- a list\n", tmp_path)


def test_round_trip() -> None:
    s = parse_scenario(GOOD, "tiny.yaml")
    text = dump_scenario(s)
    assert parse_scenario(text, "tiny.yaml") == s


@pytest.mark.parametrize("path", sorted(LIBRARY.glob("*.yaml")), ids=lambda p: p.stem)
def test_library_loads_and_round_trips(path: Path) -> None:
    s = load_scenario(path)
    assert s.name == path.stem
    assert parse_scenario(dump_scenario(s), path.name) == s


# Refusal reasons no scenario can provoke: the executor authenticates the agent's token
# when a session opens, so an unknown principal never gets as far as an action
# (tests/authz covers UNAUTHENTICATED at the sidecar).
_NOT_IN_SCENARIOS = {"ALLOW", "UNAUTHENTICATED"}


def test_library_covers_the_faults_and_reasons() -> None:
    faults: set[str] = set()
    reasons: set[str] = set()
    apps: set[str] = set()
    scenarios = [load_scenario(p) for p in sorted(LIBRARY.glob("*.yaml"))]
    for s in scenarios:
        apps.add(s.app)
        faults.update(s.faults())
        for step in s.steps:
            if isinstance(step, ActStep):
                reasons.update(step.act.expect.reasons()[:1])  # the first-named reason
    runnable = [s for s in scenarios if s.skip_reason() is None]
    assert len(runnable) == len(scenarios) >= 10
    assert apps == {"subscription", "subscription-2fa", "checkout", "admin", "fetchshop", "notes", "plans"}
    assert faults >= set(FAULT_KINDS)
    assert reasons >= {"APPROVAL_REQUIRED", "APPROVAL_DENIED", "FOCUS_MISMATCH", "TARGET_CHANGED"}
    missing = set(REASONS) - _NOT_IN_SCENARIOS - reasons
    assert not missing, f"no scenario is refused with {sorted(missing)}"


def test_desktop_scenarios_need_a_display() -> None:
    s = load_scenario(LIBRARY / "desktop-focus-stolen.yaml")
    assert s.desktop and s.needs_display()
    assert s.default_target == "desktop:desktop-focus-stolen"
    assert s.skip_reason() is None
    assert s.skip_reason(display="missing Xvfb") == "needs an X display: missing Xvfb"
    browser = load_scenario(LIBRARY / "checkout-pay-once.yaml")
    assert browser.skip_reason(display="missing Xvfb") is None


APPROVALS = """\
app: checkout
grants:
  - {id: pay, verbs: [submit], require_approval_verbs: [submit], approval_timeout_s: 5, single_use: true}
steps:
  - observe
  - act:
      kind: click
      target: {role: button, name: Place order}
      approval_wait_ms: 5000
      fault: {kind: approve, note: fine}
  - act: {kind: click, target: {role: button, name: Pay}, expect: REFUSED APPROVAL_REQUIRED}
  - fault: {kind: deny, agent: agent}
  - act: {kind: click, target: {role: button, name: Pay}, expect: REFUSED APPROVAL_DENIED}
"""


def test_approvals_in_the_format(tmp_path: Path) -> None:
    s = parse_scenario(APPROVALS, "approvals.yaml")
    assert s.grants[0].require_approval_verbs == ["submit"] and s.grants[0].single_use
    assert s.faults() == ["approve", "deny"]
    act = s.steps[1]
    assert isinstance(act, ActStep) and act.act.approval_wait_ms == 5000
    assert parse_scenario(dump_scenario(s), "approvals.yaml") == s
    message = _error(APPROVALS.replace("      approval_wait_ms: 5000\n", ""), tmp_path)
    assert ":6: steps[1].act: the approve fault rides on an act that waits: set approval_wait_ms" in message
    message = _error(APPROVALS.replace("{kind: deny, agent: agent}", "{kind: deny, agent: mallory}"), tmp_path)
    assert ":12: steps[3].fault.agent: unknown agent 'mallory'" in message


DESKTOP = """\
app: notes
sessions: [{name: main, backend: desktop}]
grants: [{id: typing, verbs: [input]}]
steps:
  - observe
  - fault: {kind: steal_focus, window: popup}
  - act: {kind: type, text: hello, expect: REFUSED FOCUS_MISMATCH}
  - fault: {kind: move_window, x: 10, y: 20}
  - act: {kind: click, x: 5, y: 6}
  - act: {kind: activate}
"""


def test_desktop_in_the_format(tmp_path: Path) -> None:
    s = parse_scenario(DESKTOP, "desk.yaml")
    assert s.faults() == ["steal_focus", "move_window"]
    assert parse_scenario(dump_scenario(s), "desk.yaml") == s
    text = DESKTOP.replace("{kind: click, x: 5, y: 6}", "{kind: click, target: {role: button, name: Red}}")
    assert ":9: steps[4].act: a desktop action names no role and name" in _error(text, tmp_path)
    text = DESKTOP.replace("{kind: click, x: 5, y: 6}", "{kind: click}")
    assert ":9: steps[4].act: a desktop click needs a point (x, y)" in _error(text, tmp_path)
    text = DESKTOP.replace("{kind: click, x: 5, y: 6}", "{kind: fill, text: x}")
    assert ":9: steps[4].act: a desktop session has no fill action" in _error(text, tmp_path)
    text = DESKTOP.replace("backend: desktop", "backend: browser")
    assert ":2: sessions[0].backend: the notes app is driven by a desktop session" in _error(text, tmp_path)
    text = GOOD.replace("  - fault: rerender", "  - fault: steal_focus")
    assert ":14: steps[2].fault: steal_focus needs a desktop app (app: notes)" in _error(text, tmp_path)
    text = GOOD.replace("      idempotency_key: k1\n", "      idempotency_key: k1\n      x: 3\n      y: 4\n")
    assert "steps[1].act: a browser action names its target by role and name" in _error(text, tmp_path)


def test_reasons_are_the_wire_contracts_reasons() -> None:
    from handrail.proto.executor.v1 import executor_pb2 as pb

    assert set(REASONS) == set(pb.Reason.keys()) - {"REASON_UNSPECIFIED"}
