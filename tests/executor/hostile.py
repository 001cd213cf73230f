"""Helpers for the tests on hostile pages (``handrail.scenarios.PlansApp``).

They read the snapshot *text* the way an agent that parses it would, so that the very
same tests ran against the executor before it had a structured element list (that is
how they were seen to fail there).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from handrail.executor import Observation
from handrail.scenarios import PlansApp

_LINE = re.compile(r'^(?P<indent> *)- (?P<role>[a-z]+)(?: "(?P<name>[^"]*)")?.*?\[ref=(?P<ref>[a-z0-9]+)\]')


def cancel_ref(obs: Observation, plan: str) -> str:
    """The ref of the "Cancel" button in the row whose first cell is ``plan``, by reading
    the snapshot's lines as a text-parsing agent does."""
    in_row = False
    row_indent = -1
    for line in obs.snapshot.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        indent = len(m.group("indent"))
        if m.group("role") == "row":
            in_row, row_indent = False, indent
        elif indent > row_indent and m.group("role") == "cell" and m.group("name") == plan:
            in_row = True
        elif in_row and indent > row_indent and m.group("role") == "button" and m.group("name") == "Cancel":
            return m.group("ref")
    raise AssertionError(f"no Cancel button in the row of {plan!r}:\n{obs.snapshot}")


def field_ref(obs: Observation, label: str) -> str:
    for line in obs.snapshot.splitlines():
        m = _LINE.match(line)
        if m and m.group("role") == "textbox" and m.group("name") == label:
            return m.group("ref")
    raise AssertionError(f"no textbox {label!r}:\n{obs.snapshot}")


def settled_cancellations(app: PlansApp, expected: Sequence[str], *, wait_s: float = 2.0) -> list[str]:
    """The plans cancelled so far, once ``expected`` arrived (or ``wait_s`` passed), after a
    short grace period for a request still on its way."""
    deadline = time.monotonic() + wait_s
    while len(app.cancelled()) < len(expected) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.15)
    return app.cancelled()


def profile_settled(app: PlansApp, *, wait_s: float = 0.4) -> dict[str, str]:
    """The profile's fields, after the autosaves in flight had time to land."""
    time.sleep(wait_s)
    return dict(app.state()["profile"])
