"""An agent written from the two .proto files alone: no Handrail package is imported.

It generates its gRPC stubs at run time, into a temporary directory, from
``proto/executor/v1/executor.proto`` (and ``authz.proto``, for the reasons' names), with
``grpc_tools.protoc``, and uses only what the comments in those files say:

1. authenticate with ``authorization: Bearer <token>`` metadata (an agent's token);
2. ``OpenSession`` on a target (``lease_epoch`` 0 would mean no lease; ``lease_reason``
   says why), then ``Observe``: refs like ``[ref=e12]`` come from the snapshot;
3. ``Act`` citing the latest observation: fill a field, then click a button;
4. a refusal is an OK answer with ``outcome = REFUSED`` and a ``reason``: it acts on the
   reason (``STALE_OBSERVATION``: take the newer observation and act again;
   ``OUT_OF_SCOPE``: give the action up);
5. an error status carries a ``google.rpc.ErrorInfo`` (reason, ``metadata["field"]``) in
   the ``grpc-status-details-bin`` trailer: it reads it;
6. ``CloseSession``.

    python examples/proto_only/client.py --executor HOST:PORT --token TOKEN \\
        --target browser:shop --url http://127.0.0.1:8000/

Needs ``grpcio``, ``grpcio-tools`` and ``googleapis-common-protos`` only. Exit code 0
when every step behaved as the .proto says it would.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import tempfile
import uuid
from pathlib import Path
from types import ModuleType

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parents[2] / "proto"


def generate_stubs(out: Path) -> tuple[ModuleType, ModuleType]:
    """protoc the executor's .proto into ``out``; return (messages, stubs)."""
    source = PROTO_ROOT / "executor" / "v1" / "executor.proto"
    args = ["protoc", f"-I{source.parent}", f"--python_out={out}", f"--grpc_python_out={out}", source.name]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    sys.path.insert(0, str(out))
    return importlib.import_module("executor_pb2"), importlib.import_module("executor_pb2_grpc")


def error_info(exc: grpc.RpcError) -> tuple[str, str]:
    """(reason, field) of the ErrorInfo in an error status's details."""
    for key, value in exc.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info.reason, info.metadata.get("field", "")
    return "", ""


def ref_of(snapshot: str, role: str, name: str) -> str:
    """The ref of the element ``role "name"`` in an ARIA snapshot (refs look like [ref=e12])."""
    match = re.search(rf'{re.escape(role)} "{re.escape(name)}"[^\n]*\[ref=(e\d+)\]', snapshot)
    if match is None:
        raise SystemExit(f"no {role} {name!r} in the snapshot")
    return match.group(1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executor", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--url", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pb, pb_grpc = generate_stubs(Path(tmp))
        return run(pb, pb_grpc, args)


def run(pb: ModuleType, pb_grpc: ModuleType, args: argparse.Namespace) -> int:
    md = (("authorization", f"Bearer {args.token}"),)
    with grpc.insecure_channel(args.executor) as channel:
        stub = pb_grpc.ExecutorStub(channel)
        session = stub.OpenSession(pb.OpenSessionRequest(target=args.target, start_url=args.url), metadata=md)
        sid = session.session_id
        print(f"session {sid}, lease epoch {session.lease_epoch}")
        if session.lease_epoch == 0:
            print(f"no lease: {pb.Reason.Name(session.lease_reason)}")
            return 1

        def act(obs_id: str, kind: int, **fields: object) -> object:
            request = pb.ActRequest(
                session_id=sid, observation_id=obs_id, kind=kind, idempotency_key=uuid.uuid4().hex, **fields
            )
            return stub.Act(request, metadata=md)

        first = stub.Observe(pb.ObserveRequest(session_id=sid), metadata=md)
        name_ref = ref_of(first.snapshot, "textbox", "Full name")
        filled = act(first.observation_id, pb.ACTION_FILL, ref=name_ref, text="Ada Lovelace")
        print(f"fill: {pb.Outcome.Name(filled.result.outcome)}")  # type: ignore[attr-defined]
        if filled.result.outcome != pb.DONE:  # type: ignore[attr-defined]
            return 1

        # Citing the first observation again: it is no longer the latest. The .proto says
        # this is refused with STALE_OBSERVATION: observe again (or take the newer one).
        city_ref = ref_of(first.snapshot, "textbox", "City")
        stale = act(first.observation_id, pb.ACTION_FILL, ref=city_ref, text="London")
        reason = pb.Reason.Name(stale.result.reason)  # type: ignore[attr-defined]
        print(f"fill citing an old observation: {pb.Outcome.Name(stale.result.outcome)} {reason}")  # type: ignore[attr-defined]
        if stale.result.outcome != pb.REFUSED or reason != "STALE_OBSERVATION":  # type: ignore[attr-defined]
            return 1
        latest = filled.observation  # type: ignore[attr-defined]
        again = act(
            latest.observation_id, pb.ACTION_FILL, ref=ref_of(latest.snapshot, "textbox", "City"), text="London"
        )
        print(f"fill, observed again: {pb.Outcome.Name(again.result.outcome)}")  # type: ignore[attr-defined]

        # Out of scope: a page of another origin. Refused before anything happens.
        away = act(again.observation.observation_id, pb.ACTION_NAVIGATE, url="http://example.invalid/")  # type: ignore[attr-defined]
        away_reason = pb.Reason.Name(away.result.reason)  # type: ignore[attr-defined]
        print(f"navigate elsewhere: {pb.Outcome.Name(away.result.outcome)} {away_reason}")  # type: ignore[attr-defined]
        if away.result.outcome != pb.REFUSED or away.result.execution_started:  # type: ignore[attr-defined]
            return 1

        obs = stub.Observe(pb.ObserveRequest(session_id=sid), metadata=md)
        clicked = act(obs.observation_id, pb.ACTION_CLICK, ref=ref_of(obs.snapshot, "button", "Place order"))
        print(f"click: {pb.Outcome.Name(clicked.result.outcome)} {pb.Evidence.Name(clicked.result.evidence)}")  # type: ignore[attr-defined]
        if clicked.result.outcome != pb.DONE:  # type: ignore[attr-defined]
            return 1

        # An error status: an observation of a session that is not ours.
        try:
            stub.Observe(pb.ObserveRequest(session_id="s_not_mine"), metadata=md)
        except grpc.RpcError as exc:
            reason, field = error_info(exc)
            print(f"observe another session: {exc.code().name} reason={reason} field={field}")  # type: ignore[attr-defined]
            if exc.code() != grpc.StatusCode.NOT_FOUND or field != "session_id":  # type: ignore[attr-defined]
                return 1
        stub.CloseSession(pb.CloseSessionRequest(session_id=sid), metadata=md)
        print("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
