"""The scenario format's person steps: an agent asks for a person, an operator at the console.

``ask_for_person`` (the agent's SDK call) opens a request with a ``reason`` and, with
``wait_ms``, waits for the hand-back in the background while the next steps play (an
operator acting in the console); ``wait_for_person`` joins that wait and checks how it
ended. ``console`` steps play what an operator does in the console — take over, click an
element (found on the screen by role and name), type, press a key, scroll, hand back —
through the console's own HTTP endpoints, signed in as that operator.

Example::

    - ask_for_person: {reason: Enter the code sent to your phone, wait_ms: 20000, label: ask}
    - console: take_over
    - console: {click: {role: textbox, name: Code}}
    - console: {type: "493817"}
    - console: {key: Enter}
    - console: {hand_back: {to: agent}}
    - wait_for_person: {ask: ask, expect: HANDED_BACK}
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ._acts import Model, Target

__all__ = ["AskForPersonSpec", "ConsoleSpec", "HandBackSpec", "TakeOverSpec", "WaitForPersonSpec"]

PersonOutcome = Literal["WAITING", "WITH_PERSON", "HANDED_BACK"]


class AskForPersonSpec(Model):
    """The agent hands the target to a person with ``reason``; waits up to ``wait_ms``."""

    reason: str = Field(min_length=1, max_length=1024)
    session: str = "main"
    wait_ms: int = Field(default=0, ge=0, le=600_000)
    label: str | None = None  # with wait_ms: the wait goes on in the background under this name
    expect: PersonOutcome | None = None  # without a label: how the call must end

    @model_validator(mode="after")
    def _label_for_background(self) -> AskForPersonSpec:
        if self.label and self.expect is not None:
            raise ValueError("a labelled ask waits in the background: check it with wait_for_person")
        return self


class WaitForPersonSpec(Model):
    """Join the background wait of the ask labelled ``ask``; it must end as ``expect``."""

    ask: str
    expect: PersonOutcome = "HANDED_BACK"


class TakeOverSpec(Model):
    note: str = ""


class HandBackSpec(Model):
    to: str = ""  # an agent of the scenario, or "" for no one


class ConsoleSpec(Model):
    """One operator action in the console: exactly one of the action keys."""

    operator: str | None = None
    session: str = "main"
    take_over: TakeOverSpec | None = None
    hand_back: HandBackSpec | None = None
    click: Target | None = None
    type: str | None = Field(default=None, min_length=1, max_length=4096)
    key: str | None = Field(default=None, min_length=1, max_length=64)
    scroll: int | None = Field(default=None, ge=-10_000, le=10_000)
    expect: Literal["DONE", "REFUSED", "FAILED"] = "DONE"
    reason: str | None = None  # with expect REFUSED: the reason code

    @field_validator("take_over", "hand_back", mode="before")
    @classmethod
    def _empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _one_action(self) -> ConsoleSpec:
        actions = [
            k for k in ("take_over", "hand_back", "click", "type", "key", "scroll") if getattr(self, k) is not None
        ]
        if len(actions) != 1:
            raise ValueError("a console step does one of take_over, hand_back, click, type, key, scroll")
        return self

    @property
    def action(self) -> str:
        return next(
            k for k in ("take_over", "hand_back", "click", "type", "key", "scroll") if getattr(self, k) is not None
        )

    def describe(self) -> str:
        value = getattr(self, self.action)
        if isinstance(value, Target):
            return f"click {value.role} {value.name!r}"
        if isinstance(value, HandBackSpec):
            return f"hand_back to {value.to or 'no one'}"
        return self.action if isinstance(value, TakeOverSpec) else f"{self.action} {value!r}"
