"""Errors raised by the scenario harness::

HandrailError
├── ScenarioError    a scenario file cannot be read or does not fit the schema
├── RecordError      a session cannot be turned into a scenario
└── DisplayError     Xvfb or the window manager could not be started

A fixture app refuses a bad initial state or event with a plain ``HandrailError``
(``INVALID_ARGUMENT``). :class:`Divergence` is the replay's own signal that a step or a
check did not behave as stated; :func:`~handrail.scenarios.replay` reports it and never
lets it out.
"""

from __future__ import annotations

from collections.abc import Sequence

from handrail._errors import HandrailError

__all__ = ["DisplayError", "Divergence", "RecordError", "ScenarioError"]


class ScenarioError(HandrailError):
    """A scenario file cannot be read or does not fit the schema.

    Attributes:
        problems: one ``FILE:LINE: PATH: MESSAGE`` line per problem.
    """

    reason = "INVALID_SCENARIO"

    def __init__(self, message: str, *, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems) or [message]


class RecordError(HandrailError):
    """The session cannot be turned into a scenario (unknown session, nothing to replay)."""

    reason = "RECORD_ERROR"


class DisplayError(HandrailError):
    """Xvfb or the window manager could not be started."""


class Divergence(Exception):
    """A step, or a final check, did not behave as the scenario states."""
