"""The open records of entry bodies: mappings whose known keys are typed fields.

Three records hold a caller's free-form mapping (:class:`ActionParams`, the ``extra`` of a
result as :class:`ResultExtra`, the ``detail`` of a lease change as :class:`LeaseDetail`):
their known keys are typed fields, ``None`` when absent, and every other key is kept in
``other``, so that reading one and writing it back gives the very same JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

__all__ = ["ActionParams", "LeaseDetail", "ResultExtra"]


# -- free-form records with typed known keys -------------------------------------------

# What a known key of an open record holds; a value of another shape stays in ``other``.
_STR, _INT, _STRS = "str", "int", "strs"


def _fits(shape: str, value: Any) -> bool:
    if shape == _STR:
        return isinstance(value, str)
    if shape == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class _OpenRecord:
    """A mapping whose known keys are typed fields (``None``: absent) and the rest ``other``."""

    _SHAPES: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read a stored mapping; ``to_dict()`` of the result gives the same mapping back."""
        known: dict[str, Any] = {}
        other: dict[str, Any] = {}
        for key, value in data.items():
            shape = cls._SHAPES.get(key)
            if shape is not None and _fits(shape, value):
                known[key] = tuple(value) if shape == _STRS else value
            else:
                other[str(key)] = value
        known["other"] = other
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        """The mapping as stored: the fields that are set, then ``other``."""
        out: dict[str, Any] = {}
        for name in self._SHAPES:  # the typed fields
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        out.update(getattr(self, "other", {}))
        return out


@dataclass(frozen=True)
class ActionParams(_OpenRecord):
    """An action's parameters as the intent records them (``None``: not given).

    Attributes:
        kind: the action kind (an :class:`~handrail.ActionKind` value).
        observation_id: the observation the action cited.
        ref, role, name: the element, by the observation's ref and its ARIA role and name.
        text, key, keys, values, url, files: what the action typed, pressed, chose,
            opened or uploaded.
        x, y, to_x, to_y, button, click_count, delta_x, delta_y, key_delay_ms, tab_id:
            pointer, scroll, typing and tab details.
        fingerprint: a digest of what the action does, independent of refs; an
            idempotency key reused with another fingerprint is a conflict.
        decision_id: the authorization decision that allowed it.
        other: every other key, as given.
    """

    _SHAPES: ClassVar[Mapping[str, str]] = {
        "kind": _STR,
        "observation_id": _STR,
        "ref": _STR,
        "role": _STR,
        "name": _STR,
        "text": _STR,
        "key": _STR,
        "keys": _STRS,
        "values": _STRS,
        "url": _STR,
        "files": _STRS,
        "x": _INT,
        "y": _INT,
        "to_x": _INT,
        "to_y": _INT,
        "button": _STR,
        "click_count": _INT,
        "delta_x": _INT,
        "delta_y": _INT,
        "key_delay_ms": _INT,
        "tab_id": _STR,
        "fingerprint": _STR,
        "decision_id": _STR,
    }

    kind: str | None = None
    observation_id: str | None = None
    ref: str | None = None
    role: str | None = None
    name: str | None = None
    text: str | None = None
    key: str | None = None
    keys: tuple[str, ...] | None = None
    values: tuple[str, ...] | None = None
    url: str | None = None
    files: tuple[str, ...] | None = None
    x: int | None = None
    y: int | None = None
    to_x: int | None = None
    to_y: int | None = None
    button: str | None = None
    click_count: int | None = None
    delta_x: int | None = None
    delta_y: int | None = None
    key_delay_ms: int | None = None
    tab_id: str | None = None
    fingerprint: str | None = None
    decision_id: str | None = None
    other: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResultExtra(_OpenRecord):
    """The ``extra`` of a result (``None``: not given).

    Attributes:
        decision_id: the authorization decision the action ran under.
        typed_chars: how many characters a desktop type action typed.
        via: how a browser click went out (``"pointer"``, ``"playwright"``).
        intent_seq: for a result that recovery wrote, the intent entry it closes.
        recorded_by: ``"recovery"`` for a result that recovery wrote; ``"network"`` for
            a result that amends an earlier one after a request of the action ended
            without a response.
        amends: the result entry (its ``seq``) that this later result supersedes.
        other: every other key, as given.
    """

    _SHAPES: ClassVar[Mapping[str, str]] = {
        "decision_id": _STR,
        "typed_chars": _INT,
        "via": _STR,
        "intent_seq": _INT,
        "recorded_by": _STR,
        "amends": _INT,
    }

    decision_id: str | None = None
    typed_chars: int | None = None
    via: str | None = None
    intent_seq: int | None = None
    recorded_by: str | None = None
    amends: int | None = None
    other: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LeaseDetail(_OpenRecord):
    """The ``detail`` of a lease change (``None``: not given).

    Attributes:
        holder_kind: ``"human"``, ``"agent"`` ... as the sidecar said.
        next_holder: the agent a hand-back names as the next holder, if any.
        other: every other key, as given.
    """

    _SHAPES: ClassVar[Mapping[str, str]] = {"holder_kind": _STR, "next_holder": _STR}

    holder_kind: str | None = None
    next_holder: str | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
