"""The records built on every check get a faster ``__init__`` (``_models.quick_init``): it
must build exactly what the one ``dataclasses`` writes would, and keep them frozen."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from handrail.authz._decide import Verdict
from handrail.authz._models import (
    CheckInput,
    Decision,
    DecisionRecord,
    ElementContext,
    PolicyResult,
    Principal,
    quick_init,
)

QUICK = (Principal, ElementContext, CheckInput, Decision, PolicyResult, DecisionRecord, Verdict)


def _reference(cls: type) -> type:
    """The same class with the ``__init__`` ``dataclasses`` writes."""
    return dataclasses.dataclass(frozen=True)(
        type(
            cls.__name__,
            (),
            {"__annotations__": cls.__annotations__}
            | {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING},
        )
    )


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_the_quick_init_takes_what_the_dataclass_init_takes(cls: type) -> None:
    assert inspect.signature(cls) == inspect.signature(_reference(cls))


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_the_quick_init_builds_the_same_frozen_record(cls: type) -> None:
    fields = dataclasses.fields(cls)
    required = [f"v{i}" for i, f in enumerate(fields) if f.default is dataclasses.MISSING]
    record, reference = cls(*required), _reference(cls)(*required)
    assert vars(record) == vars(reference)
    assert list(vars(record)) == [f.name for f in fields]  # in field order, as dataclasses sets them
    everything = {f.name: f"x{i}" for i, f in enumerate(fields)}
    assert vars(cls(**everything)) == everything
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, fields[0].name, "changed")
    assert record == cls(*required) and hash(record) == hash(cls(*required))


def test_quick_init_refuses_what_it_cannot_copy() -> None:
    @dataclasses.dataclass(frozen=True)
    class Factory:
        items: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True)
    class PostInit:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class KeywordOnly:
        x: int

    for cls in (Factory, Mutable, PostInit, KeywordOnly):
        with pytest.raises(TypeError):
            quick_init(cls)
