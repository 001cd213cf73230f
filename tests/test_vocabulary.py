"""The shared vocabulary is pinned to the wire contract's enums, both ways."""

from __future__ import annotations

from google.protobuf.descriptor import EnumDescriptor

from handrail import DECISION_REASONS, ActionKind, Evidence, Outcome, Reason, Verb, Verdict
from handrail.proto.authz.v1 import authz_pb2
from handrail.proto.executor.v1 import executor_pb2


def _names(enum: EnumDescriptor, prefix: str = "") -> list[str]:
    """The enum's value names without its UNSPECIFIED zero and without ``prefix``."""
    return [v.name.removeprefix(prefix) for v in enum.values if v.number != 0]


def test_reasons_are_the_executor_wire_reasons() -> None:
    assert [r.value for r in Reason] == _names(executor_pb2.Reason.DESCRIPTOR)


def test_decision_reasons_are_the_authz_wire_reasons() -> None:
    assert [r.value for r in DECISION_REASONS] == _names(authz_pb2.Reason.DESCRIPTOR)


def test_both_protos_number_the_decision_reasons_alike() -> None:
    for reason in DECISION_REASONS:
        assert authz_pb2.Reason.Value(reason.value) == executor_pb2.Reason.Value(reason.value), reason


def test_outcomes() -> None:
    assert [o.value for o in Outcome] == _names(executor_pb2.Outcome.DESCRIPTOR)


def test_evidence_levels() -> None:
    assert [e.value for e in Evidence] == _names(executor_pb2.Evidence.DESCRIPTOR, "EVIDENCE_")


def test_verdicts() -> None:
    assert [v.value for v in Verdict] == _names(executor_pb2.Verdict.DESCRIPTOR)


def test_verbs() -> None:
    assert [v.value.upper() for v in Verb] == _names(authz_pb2.Verb.DESCRIPTOR, "VERB_")


def test_action_kinds() -> None:
    assert [k.value.upper() for k in ActionKind] == _names(executor_pb2.ActionKind.DESCRIPTOR, "ACTION_")


def test_every_action_kind_names_a_verb() -> None:
    for kind in ActionKind:
        assert kind.verb in Verb
    assert ActionKind.WAIT_FOR.is_read and ActionKind.WAIT_FOR.verb is Verb.READ
    assert not ActionKind.CLICK.is_read and ActionKind.CLICK.verb is Verb.SUBMIT
