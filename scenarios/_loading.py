"""Reading scenario files: YAML, the schema, cross-references, errors with file and line.

Example::

    from handrail.scenarios import load_scenario

    scenario = load_scenario("scenarios/subscription-cancel-renewal.yaml")
    # scenarios/x.yaml:14: steps[3].act.target: field required  (a ScenarioError)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from handrail._vocabulary import ActionKind

from ._acts import BROWSER_KINDS, DESKTOP_KINDS, ActSpec, DecideWhileWaiting
from ._errors import ScenarioError
from ._faults import (
    AcquireLease,
    Approve,
    Deny,
    HandBack,
    MakeGrant,
    MoveWindow,
    OpenModal,
    Rerender,
    RestartApp,
    Revoke,
    StealFocus,
    TakeOver,
)
from ._scenario import (
    ActStep,
    AskForPersonStep,
    ConsoleStep,
    FaultStep,
    ObserveStep,
    ReconcileStep,
    Scenario,
    WaitForPersonStep,
    WaitStep,
)

__all__ = ["dump_scenario", "load_scenario", "parse_scenario"]


def _cross_check(s: Scenario) -> list[tuple[tuple[Any, ...], str]]:
    """Names that must refer to something declared: (location, message) pairs."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    agents, operators = set(s.principals.agents), set(s.principals.operators)
    sessions = {x.name for x in s.sessions}
    grants = {g.id for g in s.grants}
    if len(sessions) != len(s.sessions):
        problems.append((("sessions",), "session names must be unique"))
    if len(grants) != len(s.grants):
        problems.append((("grants",), "grant ids must be unique"))
    for i, g in enumerate(s.grants):
        if g.principal is not None and g.principal not in agents:
            problems.append((("grants", i, "principal"), f"unknown agent {g.principal!r}"))
        if g.operator is not None and g.operator not in operators:
            problems.append((("grants", i, "operator"), f"unknown operator {g.operator!r}"))
        if g.operator is None and not operators:
            problems.append((("grants", i), "a grant needs an operator in principals"))
    backends: dict[str, str] = {}
    for i, x in enumerate(s.sessions):
        backends[x.name] = x.backend
        if x.agent is not None and x.agent not in agents:
            problems.append((("sessions", i, "agent"), f"unknown agent {x.agent!r}"))
        if (x.backend == "desktop") != s.desktop:
            wanted = "desktop" if s.desktop else "browser"
            problems.append((("sessions", i, "backend"), f"the {s.app} app is driven by a {wanted} session"))
    labels: set[str] = set()
    keys: set[str] = set()
    asks: set[str] = set()
    for i, step in enumerate(s.steps):
        where: tuple[Any, ...] = ("steps", i)
        if isinstance(step, ObserveStep):
            spec = step.observe
            if spec.session not in sessions:
                problems.append(((*where, "observe", "session"), f"no session {spec.session!r}"))
            if spec.label:
                labels.add(spec.label)
        elif isinstance(step, ActStep):
            act = step.act
            if act.session not in sessions:
                problems.append(((*where, "act", "session"), f"no session {act.session!r}"))
            if act.observation is not None and act.observation not in labels:
                problems.append(
                    (
                        (*where, "act", "observation"),
                        f"no earlier observation labelled {act.observation!r}",
                    )
                )
            if act.idempotency_key:
                keys.add(act.idempotency_key)
            problem = _act_problem(act, backends.get(act.session, "browser"))
            if problem is not None:
                problems.append(((*where, "act"), problem))
            if act.fault is not None and act.fault.kind == "drop_connection" and s.desktop:
                problems.append(((*where, "act", "fault"), "drop_connection needs a browser fixture app"))
            if isinstance(act.fault, DecideWhileWaiting) and act.fault.operator not in (None, *operators):
                problems.append(((*where, "act", "fault", "operator"), f"unknown operator {act.fault.operator!r}"))
        elif isinstance(step, ReconcileStep):
            rec = step.reconcile
            if rec.key not in keys:
                problems.append(((*where, "reconcile", "key"), f"no earlier act with key {rec.key!r}"))
            if rec.session not in sessions:
                problems.append(((*where, "reconcile", "session"), f"no session {rec.session!r}"))
        elif isinstance(step, FaultStep):
            fault = step.fault
            if isinstance(fault, Revoke | MakeGrant) and fault.grant not in grants:
                problems.append(((*where, "fault", "grant"), f"no grant {fault.grant!r}"))
            if isinstance(fault, TakeOver | HandBack | Revoke | MakeGrant):
                if fault.operator is not None and fault.operator not in operators:
                    problems.append(((*where, "fault", "operator"), f"unknown operator {fault.operator!r}"))
                if fault.operator is None and not operators:
                    problems.append((where, "this fault needs an operator in principals"))
            if isinstance(fault, HandBack) and fault.to and fault.to not in agents:
                problems.append(((*where, "fault", "to"), f"unknown agent {fault.to!r}"))
            if isinstance(fault, AcquireLease | Approve | Deny) and fault.agent and fault.agent not in agents:
                problems.append(((*where, "fault", "agent"), f"unknown agent {fault.agent!r}"))
            if isinstance(fault, Approve | Deny) and fault.operator not in (None, *operators):
                problems.append(((*where, "fault", "operator"), f"unknown operator {fault.operator!r}"))
            if isinstance(fault, StealFocus | MoveWindow | RestartApp) and not s.desktop:
                problems.append(((*where, "fault"), f"{fault.kind} needs a desktop app (app: notes)"))
            if isinstance(fault, Rerender | OpenModal) and s.desktop:
                problems.append(((*where, "fault"), f"{fault.kind} needs a browser fixture app"))
        elif isinstance(step, AskForPersonStep):
            ask = step.ask_for_person
            if ask.session not in sessions:
                problems.append(((*where, "ask_for_person", "session"), f"no session {ask.session!r}"))
            if ask.label:
                if ask.label in asks:
                    problems.append(((*where, "ask_for_person", "label"), f"label {ask.label!r} is used twice"))
                if not ask.wait_ms:
                    problems.append(((*where, "ask_for_person", "wait_ms"), "a labelled ask waits: give wait_ms"))
                asks.add(ask.label)
        elif isinstance(step, WaitForPersonStep):
            if step.wait_for_person.ask not in asks:
                problems.append(
                    ((*where, "wait_for_person", "ask"), f"no earlier ask labelled {step.wait_for_person.ask!r}")
                )
        elif isinstance(step, ConsoleStep):
            con = step.console
            if con.operator not in (None, *operators) or (con.operator is None and not operators):
                problems.append(((*where, "console", "operator"), f"unknown operator {con.operator or '(none)'!r}"))
            if con.session not in sessions:
                problems.append(((*where, "console", "session"), f"no session {con.session!r}"))
            if con.hand_back is not None and con.hand_back.to and con.hand_back.to not in agents:
                problems.append(((*where, "console", "hand_back", "to"), f"unknown agent {con.hand_back.to!r}"))
            if s.desktop and con.click is not None:
                problems.append(((*where, "console", "click"), "a console click by role and name needs a browser"))
        elif isinstance(step, WaitStep):
            name = step.wait.grant_expired
            if name is not None:
                if name not in grants:
                    problems.append(((*where, "wait", "grant_expired"), f"no grant {name!r}"))
                elif not s.grant(name).expires_in_s:
                    problems.append(((*where, "wait", "grant_expired"), f"grant {name!r} never expires"))
    return problems


_POINT_KINDS = (ActionKind.CLICK, ActionKind.DOUBLE_CLICK)  # a desktop click names its point


def _act_problem(act: ActSpec, backend: str) -> str | None:
    """What an act lacks or has too much of for its session's backend, or None."""
    if backend == "desktop":
        if act.kind not in DESKTOP_KINDS:
            return f"a desktop session has no {act.kind} action (here: {', '.join(DESKTOP_KINDS)})"
        if act.target is not None:
            return "a desktop action names no role and name: give a point (x, y) in the window"
        if act.kind in _POINT_KINDS and act.x is None:
            return f"a desktop {act.kind} needs a point (x, y) in the window"
        return None
    if act.kind not in BROWSER_KINDS:
        return f"{act.kind} is a desktop action"
    if act.x is not None:
        return "a browser action names its target by role and name, not by a point"
    if act.kind is not ActionKind.NAVIGATE and act.target is None:
        return f"a {act.kind} action needs a target (role and name)"
    return None


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    """Parse and validate a scenario from YAML text.

    Args:
        text: the YAML document.
        source: the file name used in error messages.

    Raises:
        ScenarioError: the YAML is malformed or does not fit the schema; every problem is
            one line ``FILE:LINE: PATH: MESSAGE``.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{source}:{line}: malformed YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}:1: a scenario is a mapping (name, app, steps, ...)")
    if "name" not in data:
        stem = Path(source).stem
        data["name"] = stem if stem and not stem.startswith("<") else "scenario"
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            path, line = _locate(root, data, err["loc"])
            msg = str(err["msg"])
            msg = msg[:1].lower() + msg[1:]
            if msg.startswith("value error, "):
                msg = msg[len("value error, ") :]
            problems.append((line, f"{source}:{line}: {path or '(top)'}: {msg}"))
        raise ScenarioError(
            "\n".join(text for _, text in sorted(problems, key=lambda p: p[0])),
            problems=[text for _, text in problems],
        ) from None
    cross = _cross_check(scenario)
    if cross:
        lines = []
        for loc, msg in cross:
            path, line = _locate(root, data, loc)
            lines.append(f"{source}:{line}: {path}: {msg}")
        raise ScenarioError("\n".join(lines), problems=lines)
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate one scenario file.

    Raises:
        ScenarioError: the file cannot be read, or it is not a valid scenario (with the
            file and line of each problem).
    """
    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read: {exc.strerror}") from None
    return parse_scenario(text, str(p))


def dump_scenario(scenario: Scenario) -> str:
    """The scenario as YAML that :func:`parse_scenario` reads back to an equal scenario."""
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data["steps"] = [step.model_dump(mode="json", exclude_defaults=True) or {"observe": {}} for step in scenario.steps]
    for step in data["steps"]:
        if "observe" in step and step["observe"] == {}:
            step["observe"] = None
    text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=96)
    return text.replace("observe: null", "observe:")


# -- locating errors -------------------------------------------------------------------


def _locate(root: yaml.Node | None, data: Any, loc: Sequence[Any]) -> tuple[str, int]:
    """Turn a pydantic error location into (``steps[3].act.target``, line number).

    Union tags that pydantic adds to a location are not keys of the data; they are
    left out. The line is that of the deepest node the path reaches (for a missing
    field, the mapping that lacks it).
    """
    parts: list[str] = []
    node = root
    line = (root.start_mark.line + 1) if root is not None else 1
    value = data
    for i, item in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(value, list) and isinstance(item, int) and 0 <= item < len(value):
            parts.append(f"[{item}]")
            value = value[item]
            node = _child(node, item)
            if node is not None:
                line = node.start_mark.line + 1
        elif isinstance(value, dict) and item in value:
            parts.append(f".{item}")
            value = value[item]
            key_node, node = _entry(node, str(item))
            if key_node is not None:
                line = key_node.start_mark.line + 1
        elif last and isinstance(item, str) and not (parts and parts[-1] == f".{item}"):
            parts.append(f".{item}")
    return "".join(parts).lstrip("."), line


def _child(node: yaml.Node | None, index: int) -> yaml.Node | None:
    if isinstance(node, yaml.SequenceNode) and 0 <= index < len(node.value):
        child: yaml.Node = node.value[index]
        return child
    return None


def _entry(node: yaml.Node | None, key: str) -> tuple[yaml.Node | None, yaml.Node | None]:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return key_node, value_node
    return None, None
