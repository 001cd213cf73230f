"""The wire adapter: the sidecar's own enums are pinned to the proto, the authz wire carries
only decision reasons, and every RPC has one call builder that both clients use."""

from __future__ import annotations

import inspect

import pytest
from google.protobuf.descriptor import EnumDescriptor

from handrail import DECISION_REASONS, Reason
from handrail.authz import AsyncAuthzClient, AuthzClient, InvalidArgumentError, _wire, _wire_calls
from handrail.authz._models import ApprovalStatus, CheckInput, Decision, DecisionRecord, HolderKind, LeaseInfo, Role
from handrail.proto.authz.v1 import authz_pb2 as pb


def _names(enum: EnumDescriptor, prefix: str) -> list[str]:
    return [v.name.removeprefix(prefix) for v in enum.values if v.number != 0]


def test_roles_statuses_and_holder_kinds_are_the_wire_enums() -> None:
    assert [r.value.upper() for r in Role] == _names(pb.Role.DESCRIPTOR, "ROLE_")
    assert [s.value for s in ApprovalStatus] == _names(pb.ApprovalStatus.DESCRIPTOR, "APPROVAL_STATUS_")
    assert [k.value.upper() for k in HolderKind if k.value] == _names(pb.HolderKind.DESCRIPTOR, "HOLDER_")


def test_every_decision_reason_goes_over_the_wire_and_back() -> None:
    for reason in DECISION_REASONS:
        msg = _wire.decision_to_pb(Decision(reason is Reason.ALLOW, reason.value, "m", "d"))
        assert _wire.decision_from_pb(msg).reason == reason
        assert _wire.reason_from_pb(_wire.reason_to_pb(reason.value.lower())) == reason


@pytest.mark.parametrize("reason", [r for r in Reason if not r.is_decision])
def test_an_executor_only_reason_never_reaches_the_authz_wire(reason: Reason) -> None:
    with pytest.raises(ValueError, match="not a decision reason"):
        _wire.decision_to_pb(Decision(False, reason.value, "m"))
    record = DecisionRecord("d", 1, "exe", CheckInput("a", "t", 1, "submit"), Decision(False, reason.value, "m"))
    with pytest.raises(ValueError, match="not a decision reason"):
        _wire.record_to_pb(record)
    with pytest.raises(InvalidArgumentError) as err:
        _wire.reason_to_pb(reason.value)
    assert err.value.field == "reason"


def test_a_logged_decision_goes_over_the_wire_and_back() -> None:
    request = CheckInput("agent-a", "t", 3, "submit", url="https://x.test/a", element_name="Save", fingerprint="f")
    decision = Decision(False, "POLICY_FORBID", "no", "d", ("p",), "g", 3, shadow_policies=("s",))
    record = DecisionRecord("d", 5, "exe", request, decision, LeaseInfo("t", "agent", "agent-a", 3, 9), ("g",))
    assert _wire.record_from_pb(_wire.record_to_pb(record)) == record


def _rpcs() -> list[str]:
    return [m.name for m in pb.DESCRIPTOR.services_by_name["Authz"].methods]


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def test_every_unary_rpc_has_one_call_builder_named_after_it() -> None:
    for rpc in _rpcs():
        if rpc == "Watch":  # server streaming: the clients read events, see watch_request
            assert callable(_wire_calls.watch_request)
            continue
        builder = getattr(_wire_calls, _snake(rpc))
        required = [p for p in inspect.signature(builder).parameters.values() if p.default is p.empty]
        samples = {"str": "submit", "int": 1, "Iterable[str]": ["submit"]}  # "submit" is a valid verb
        call = builder(*(samples[p.annotation] for p in required))
        assert call.rpc == rpc


def test_both_clients_offer_every_rpc_with_the_same_signature() -> None:
    for rpc in _rpcs():
        name = _snake(rpc)
        sync, aio = getattr(AuthzClient, name), getattr(AsyncAuthzClient, name)
        assert inspect.iscoroutinefunction(aio) or inspect.isasyncgenfunction(aio), name
        sync_params = dict(inspect.signature(sync).parameters)
        aio_params = dict(inspect.signature(aio).parameters)
        aio_params.pop("on_established", None)  # the async Watch may say when it is subscribed
        assert sync_params.keys() == aio_params.keys(), name
