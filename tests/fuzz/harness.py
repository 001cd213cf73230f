"""A fuzz harness for both services: requests generated from the message descriptors.

Every RPC of the sidecar and of the executor is called with requests that hypothesis
builds from the ``.proto`` descriptors (any field, any value its type allows: text with
NULs and 70 KiB strings, bad UTF-8 in bytes, enum numbers the ``.proto`` does not list,
negative and huge integers, NaN, up to 55 repeated items), with plausible values mixed in
(ids that exist, other agents' ids) so that requests reach past validation, and with
hand-written hostile bodies (bytes that are not the message, invalid UTF-8 in a string
field, deeply nested garbage). Each goes out under one identity: none, a bad token, an
agent, another agent, an operator, an executor, an admin, a revoked principal.

It counts, per RPC, the status codes; it flags ``INTERNAL`` and ``UNKNOWN`` (never
allowed), and *wrong allows*: an OK that the role table or the grants forbid (a role the
RPC is not for, a missing or revoked token, a lease acquired without a grant, a check
allowed outside the grant, another agent's session served, a write done on an ungranted
target). ``bench/fuzz.py`` runs it against real processes; ``tests/fuzz/`` runs a bounded
round of it.
"""

from __future__ import annotations

import collections
import fnmatch
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from handrail.authz import GrantInfo, Store
from handrail.proto.authz.v1 import authz_pb2
from handrail.proto.executor.v1 import executor_pb2
from tests.fuzz.roles import AUTHZ_ROLES, EXECUTOR_CONSOLE_RPCS, EXECUTOR_ROLES, MANAGE, ROLE_OF, SESSION_RPCS

IDENTITIES = ("none", "bad_token", "agent", "other_agent", "operator", "executor", "admin", "revoked")

GRANTED_TARGET = "fz:granted"
EXEC_TARGET = "fz:exec"
GRANTED_VERBS = frozenset({"input", "submit"})
BAD = "bad-token-" + "x" * 8

_HOSTILE_TEXT = [
    "",
    "\x00",
    "a\x00b",
    "x" * 257,
    "x" * 5000,
    "y" * 70_000,
    "../../etc/passwd",
    "javascript:alert(1)",
    "http://127.0.0.1:1/",
    "http://[::1",
    "about:blank",
    "file:///etc/passwd",
    "e1",
    "e99999",
    "*",
    "browser:*",
    "\u202eevil",
    "😀" * 300,
    "(",
    "%00",
    "Bearer",
]
#: Bodies that are not the request message: never INTERNAL, always INVALID_ARGUMENT.
_RAW_BODIES = [
    b"\xff\xff\xff\xff",
    b"\x0a\x03\xff\xfe\xfd",  # field 1, a string of invalid UTF-8
    b"\x0a\x80\x80\x80\x80\x10",  # a length past the end
    b"\x12\x7f" * 400,  # nested, truncated garbage
    b"\x08" + b"\xff" * 11,  # a varint too long
    bytes(range(256)),
]


def _int_bounds(f: FieldDescriptor) -> tuple[int, int]:
    t = f.type
    if t in (f.TYPE_INT32, f.TYPE_SINT32, f.TYPE_SFIXED32, f.TYPE_ENUM):
        return -(2**31), 2**31 - 1
    if t in (f.TYPE_UINT32, f.TYPE_FIXED32):
        return 0, 2**32 - 1
    if t in (f.TYPE_UINT64, f.TYPE_FIXED64):
        return 0, 2**64 - 1
    return -(2**63), 2**63 - 1


def _plain(f: FieldDescriptor, hints: Callable[[str], list[Any]]) -> st.SearchStrategy[Any]:
    """A value a well-meaning client would send: a plausible id, a listed enum value."""
    t = f.type
    if hints(f.name):
        return _plausible(f.name, hints, None)
    if t == f.TYPE_STRING:
        return st.text(alphabet="abcdefghij", max_size=12)
    if t == f.TYPE_BYTES:
        return st.binary(max_size=16)
    if t == f.TYPE_BOOL:
        return st.booleans()
    if t in (f.TYPE_DOUBLE, f.TYPE_FLOAT):
        return st.sampled_from([0.0, 0.5, 1.0])
    if t == f.TYPE_ENUM:
        return st.sampled_from([v.number for v in f.enum_type.values if v.number] or [0])
    return st.integers(0, 3)


#: In plausible requests: fields always set, and fields never set (they would make the
#: request invalid for most values), by message type; the rest are optional.
_FORCE = {
    "OpenSessionRequest": {"target", "start_url"},
    "ObserveRequest": {"session_id"},
    "ActRequest": {"session_id", "observation_id", "kind", "idempotency_key", "ref"},
    "ActBatchRequest": {"session_id", "actions"},
    "ReconcileRequest": {"session_id", "action_id", "verdict", "evidence"},
    "CloseSessionRequest": {"session_id"},
    "AttachRequest": {"session_id"},
    "CheckRequest": {"principal", "target", "verb", "lease_epoch"},
    "AcquireRequest": {"target", "holder"},
    "RenewRequest": {"target", "holder", "epoch"},
    "ReleaseRequest": {"target", "holder", "epoch"},
    "GrantRequest": {"grant"},
    "Grant": {"principal", "target", "verbs"},
}
_OMIT = {
    "OpenSessionRequest": {"desktop", "agent", "backend"},
    "ObserveRequest": {"screenshot"},
    "ActRequest": {
        "url",
        "values",
        "files",
        "keys",
        "tab_id",
        "button",
        "x",
        "y",
        "to_x",
        "to_y",
        "expect",
        "wait_for",
        "approval_wait_ms",
        "timeout_ms",
        "key",
        "key_delay_ms",
        "click_count",
        "delta_x",
        "delta_y",
    },
    "CheckRequest": {"resource"},
    "Grant": {
        "grant_id",
        "origins",
        "expires_at_ms",
        "path_globs",
        "role_patterns",
        "name_patterns",
        "window_class_patterns",
        "window_title_patterns",
        "require_approval_verbs",
        "approval_timeout_ms",
    },
}


def _scalar(f: FieldDescriptor, hints: Callable[[str], list[Any]]) -> st.SearchStrategy[Any]:
    t = f.type
    if t == f.TYPE_STRING:
        return st.one_of(_plausible(f.name, hints, ""), st.text(max_size=24), st.sampled_from(_HOSTILE_TEXT))
    if t == f.TYPE_BYTES:
        return st.one_of(st.binary(max_size=64), st.just(b"\xff\xfe\xfd"), st.just(b"\x00" * 100_000))
    if t == f.TYPE_BOOL:
        return st.booleans()
    if t in (f.TYPE_DOUBLE, f.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=64 if t == f.TYPE_DOUBLE else 32)
    if t == f.TYPE_ENUM:
        known = [v.number for v in f.enum_type.values]
        return st.one_of(st.sampled_from(known), st.sampled_from([-1, 99, 2**31 - 1, -(2**31)]))
    low, high = _int_bounds(f)
    extremes = st.sampled_from([low, high, -1, 0, 1, 60_001, 3_600_001])
    return st.one_of(_plausible(f.name, hints, 0), st.integers(-5, 100), extremes)


def _plausible(name: str, hints: Callable[[str], list[Any]], fallback: Any) -> st.SearchStrategy[Any]:
    """One of the plausible values of a field as they are when drawn (ids learned on the way)."""

    def pick(i: int) -> Any:
        values = hints(name)
        return values[i % len(values)] if values else fallback

    return st.integers(min_value=0, max_value=1_000_000).map(pick)


def message_strategy(
    desc: Descriptor, hints: Callable[[str], list[Any]], depth: int = 0, *, hostile: bool = True
) -> st.SearchStrategy[Any]:
    """Messages of type ``desc``: every field optional; with ``hostile``, each value any of
    its type or a hostile one, else a plausible one (so that requests get past validation)."""
    cls = message_factory.GetMessageClass(desc)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    forced: dict[str, st.SearchStrategy[Any]] = {}
    for f in desc.fields:
        if not hostile and f.name in _OMIT.get(desc.name, ()):
            continue
        if f.type == f.TYPE_MESSAGE:
            if depth >= 3:
                continue
            inner = message_strategy(f.message_type, hints, depth + 1, hostile=hostile)
        else:
            inner = _scalar(f, hints) if hostile else _plain(f, hints)
        if f.is_repeated:
            many = st.lists(inner, min_size=51, max_size=55) if hostile else st.lists(inner, min_size=1, max_size=2)
            inner = st.one_of(st.lists(inner, max_size=3), many)
        if not hostile and f.name in _FORCE.get(desc.name, ()):
            forced[f.name] = inner
        else:
            fields[f.name] = inner

    def build(values: dict[str, Any]) -> Any:
        msg = cls()
        for name, value in values.items():
            if value is None:
                continue
            f = desc.fields_by_name[name]
            target = getattr(msg, name)
            if f.is_repeated:
                if f.type == f.TYPE_MESSAGE:
                    for item in value:
                        target.add().CopyFrom(item)
                else:
                    target.extend(value)
            elif f.type == f.TYPE_MESSAGE:
                target.CopyFrom(value)
            else:
                setattr(msg, name, value)
        return msg

    return st.fixed_dictionaries(forced, optional=fields).map(build)


@dataclass
class Stats:
    """What a fuzz run saw."""

    codes: dict[str, collections.Counter[str]] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter)
    )
    wrong_allows: list[str] = field(default_factory=list)
    internal: list[str] = field(default_factory=list)
    sent: int = 0

    def record(self, rpc: str, code: str) -> None:
        self.sent += 1
        self.codes[rpc][code] += 1

    def table(self) -> str:
        lines = []
        for rpc in sorted(self.codes):
            counts = ", ".join(f"{code} {n}" for code, n in self.codes[rpc].most_common())
            lines.append(f"  {rpc:22} {counts}")
        return "\n".join(lines)


@dataclass
class World:
    """The running stack as the fuzz knows it: addresses, identities and live ids."""

    authz_address: str
    executor_address: str | None
    tokens: dict[str, str]
    names: dict[str, str]
    grant_ids: list[str] = field(default_factory=list)
    sessions: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    observations: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    victims: list[str] = field(default_factory=list)
    # Every grant made (by the setup or by a fuzzed Grant that was answered OK):
    # (principal, target or target pattern) -> the verbs granted. Revocations are not
    # tracked: an OK that rests on a revoked grant is let pass (lenient, never a false alarm).
    granted: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    start_urls: list[str] = field(default_factory=lambda: ["about:blank"])

    def grants(self, principal: str, target: str) -> set[str]:
        """The verbs ever granted to ``principal`` on ``target``."""
        verbs: set[str] = set()
        for (who, pattern), granted in self.granted.items():
            if who == principal and fnmatch.fnmatchcase(target, pattern):
                verbs |= granted
        return verbs

    def hints(self, name: str) -> list[Any]:
        """Plausible values for a field called ``name``."""
        agents = [self.names["agent"], self.names["other_agent"]]
        return {
            "target": [GRANTED_TARGET, EXEC_TARGET, "browser:other"],
            "targets": [GRANTED_TARGET],
            "principal": [*agents, self.names["operator"]],
            "holder": agents,
            "next_holder": [*agents, "nobody"],
            "agent": agents,
            "name": [*self.victims, "nobody"],
            "grant_id": self.grant_ids,
            "session_id": [s for ids in self.sessions.values() for s in ids],
            "observation_id": self.observations[-2:],
            "decision_id": self.decisions[-4:],
            "start_url": self.start_urls,
            "ref": ["e2", "e3", "e5"],
            "idempotency_key": [secrets.token_hex(4) for _ in range(4)],
            "kind": [executor_pb2.ACTION_CLICK, executor_pb2.ACTION_FILL, executor_pb2.ACTION_HOVER],
            "verb": [authz_pb2.VERB_SUBMIT, authz_pb2.VERB_INPUT, authz_pb2.VERB_DELETE],
            "verbs": [authz_pb2.VERB_SUBMIT, authz_pb2.VERB_READ],
            "verdict": [executor_pb2.HAPPENED, executor_pb2.DID_NOT_HAPPEN],
            "evidence": ["looked at the page"],
            "action_id": ["a_0000", "a_1111"],
            "epoch": [0, 1, 2],
            "lease_epoch": [0, 1, 2],
            "ttl_ms": [0, 1000, 30_000],
            "session_ttl_ms": [0, 5_000],
        }.get(name, [])

    def metadata(self, identity: str) -> tuple[tuple[str, str], ...]:
        if identity == "none":
            return ()
        token = BAD if identity == "bad_token" else self.tokens[identity]
        scheme = secrets.choice(["Bearer", "bearer", "BEARER"])
        return (("authorization", f"{scheme} {token}"),)


def prepare_world(data_dir: Path, authz_address: str, executor_address: str | None, executor_token: str = "") -> World:
    """Add the fuzz's principals (and the grant the oracle knows) to the sidecar's store."""
    names = {k: f"fz-{k.replace('_', '-')}-{secrets.token_hex(3)}" for k in ROLE_OF}
    names["revoked"] = f"fz-revoked-{secrets.token_hex(3)}"
    tokens: dict[str, str] = {}
    with Store(data_dir / "authz.sqlite") as store:
        for identity, role in ROLE_OF.items():
            tokens[identity] = store.add_principal(names[identity], role)
        tokens["revoked"] = store.add_principal(names["revoked"], "agent")
        store.revoke_principal(names["revoked"])
        if executor_token:
            tokens["executor"] = executor_token
        # Principals an admin's fuzzed RevokePrincipal / RotateToken may hit (not the fuzz's own).
        victims = [f"fz-victim-{i}-{secrets.token_hex(3)}" for i in range(2)]
        for victim in victims:
            store.add_principal(victim, "agent")
        grant = store.add_grant(
            GrantInfo("", names["agent"], GRANTED_TARGET, tuple(sorted(GRANTED_VERBS))), granted_by=names["operator"]
        )
    world = World(authz_address, executor_address, tokens, names, [grant.grant_id, "no-such-grant"], victims=victims)
    world.granted[(names["agent"], GRANTED_TARGET)] = set(GRANTED_VERBS)
    return world


@dataclass(frozen=True)
class Call:
    """One request: which service and RPC, under which identity, with what body."""

    service: str  # "authz" | "executor"
    method: MethodDescriptor
    identity: str
    request: Any  # a message, or raw bytes

    @property
    def rpc(self) -> str:
        return f"{self.service}.{self.method.name}"


def call_strategy(world: World) -> st.SearchStrategy[Call]:
    """Calls of every RPC of both services (the executor's when it runs)."""
    services = [("authz", authz_pb2.DESCRIPTOR.services_by_name["Authz"])]
    if world.executor_address:
        services.append(("executor", executor_pb2.DESCRIPTOR.services_by_name["Executor"]))
    options = []
    for name, service in services:
        # The executor serves agents only: its calls go out as one more often, so that
        # they reach past authentication into sessions, observations and actions.
        identities = IDENTITIES if name == "authz" else (*IDENTITIES, "agent", "agent", "agent", "other_agent")
        for method in service.methods:
            plausible = message_strategy(method.input_type, world.hints, hostile=False)
            body = st.one_of(
                plausible,
                message_strategy(method.input_type, world.hints),
                plausible,
                st.sampled_from(_RAW_BODIES),
                plausible,
            )
            options.append(st.builds(Call, st.just(name), st.just(method), st.sampled_from(identities), body))
    return st.one_of(*options)


class Fuzzer:
    """Sends calls to the running stack and judges each answer."""

    def __init__(self, world: World, *, deadline_s: float = 5.0) -> None:
        self.world = world
        self.stats = Stats()
        self.deadline_s = deadline_s
        self._channels = {"authz": grpc.insecure_channel(world.authz_address)}
        if world.executor_address:
            self._channels["executor"] = grpc.insecure_channel(world.executor_address)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()

    def _invoke(self, call: Call) -> tuple[str, Any]:
        method = call.method
        path = f"/{method.containing_service.full_name}/{method.name}"
        response_cls = message_factory.GetMessageClass(method.output_type)
        channel = self._channels[call.service]
        body = call.request if isinstance(call.request, bytes) else call.request.SerializeToString()
        metadata = self.world.metadata(call.identity)
        if method.server_streaming:
            stream = channel.unary_stream(
                path, request_serializer=lambda b: b, response_deserializer=response_cls.FromString
            )
            responses = stream(body, metadata=metadata, timeout=0.5)
            try:
                first = next(iter(responses), None)
                responses.cancel()
                return "OK", first
            except grpc.RpcError as exc:
                code = exc.code()  # type: ignore[attr-defined]
                return ("OK" if code == grpc.StatusCode.DEADLINE_EXCEEDED else code.name), None
        unary = channel.unary_unary(path, request_serializer=lambda b: b, response_deserializer=response_cls.FromString)
        try:
            return "OK", unary(body, metadata=metadata, timeout=self.deadline_s)
        except grpc.RpcError as exc:
            return exc.code().name, None  # type: ignore[attr-defined]

    def send(self, call: Call) -> str:
        code, response = self._invoke(call)
        self.stats.record(call.rpc, code)
        if code in ("INTERNAL", "UNKNOWN"):
            self.stats.internal.append(f"{call.rpc} as {call.identity}: {code} for {_short(call.request)}")
        if code == "OK":
            why = self.wrong_allow(call, response)
            if why:
                self.stats.wrong_allows.append(f"{call.rpc} as {call.identity}: {why} ({_short(call.request)})")
            self._learn(call, response)
        return code

    def wrong_allow(self, call: Call, response: Any) -> str:
        """Why an OK answer is one the role table or the grants forbid, or ``""``."""
        role = ROLE_OF.get(call.identity)
        rpc, req = call.method.name, call.request
        if isinstance(req, bytes):
            try:  # bytes that happen to parse (unknown fields are allowed) are that request
                req = message_factory.GetMessageClass(call.method.input_type).FromString(req)
            except Exception:
                return "a body that is not the request message was served"
            call = Call(call.service, call.method, call.identity, req)
        if role is None:
            return f"served to {call.identity}"
        if call.service == "executor":
            return self._executor_wrong_allow(call, role, response)
        if role not in AUTHZ_ROLES[rpc]:
            return f"role {role} was served"
        if rpc == "Acquire":
            holder = self.world.names[call.identity] if role == "agent" else req.holder
            if not self.world.grants(holder, req.target):
                return f"a lease on {req.target!r} went to {holder!r}, who has no grant on it"
        allowed = rpc in ("Check", "CheckHumanInput") and response is not None and response.allow
        if rpc == "CheckHumanInput" and allowed and req.principal != self.world.names.get(call.identity):
            return f"a person's input was allowed for {req.principal!r}, not the caller"
        if rpc == "Check" and response is not None and response.allow:
            verb = authz_pb2.Verb.Name(req.verb).removeprefix("VERB_").lower()
            if verb not in self.world.grants(req.principal, req.target):
                return f"allowed {verb} for {req.principal!r} on {req.target!r} outside the grant"
        return ""

    def _executor_wrong_allow(self, call: Call, role: str, response: Any) -> str:
        rpc, req = call.method.name, call.request
        if rpc in EXECUTOR_CONSOLE_RPCS:
            return "" if role in MANAGE else f"role {role} was served a console call"
        if role not in EXECUTOR_ROLES:
            return f"role {role} was served"
        if rpc in SESSION_RPCS and req.session_id not in self.world.sessions[call.identity]:
            return f"session {req.session_id!r} of someone else was served"
        results = []
        if rpc == "Act" and response is not None:
            results = [(req, response.result)]
        elif rpc == "ActBatch" and response is not None:
            results = list(zip(req.actions, response.results, strict=False))
        for action, result in results:
            if result.outcome == executor_pb2.DONE and action.kind != executor_pb2.ACTION_WAIT_FOR:
                return f"a {executor_pb2.ActionKind.Name(action.kind)} was done on an ungranted target"
        return ""

    def _learn(self, call: Call, response: Any) -> None:
        """Remember the ids an OK answer gave (so later calls reach further)."""
        rpc = call.method.name
        if call.service == "executor" and rpc == "OpenSession" and response is not None:
            owned = self.world.sessions[call.identity]
            owned.append(response.session_id)
            # Observe it at once: its observation id lets later Act calls reach the guard.
            observe = executor_pb2.DESCRIPTOR.services_by_name["Executor"].methods_by_name["Observe"]
            self.send(
                Call("executor", observe, call.identity, executor_pb2.ObserveRequest(session_id=response.session_id))
            )
            while len(owned) > 2:
                self._close_session(call.identity, owned[0])  # its answer removes it
        elif call.service == "executor" and rpc in ("CloseSession", "Attach"):
            sid = call.request.session_id
            if sid in self.world.sessions[call.identity]:
                self.world.sessions[call.identity].remove(sid)  # closed, or closed when the stream ended

        elif call.service == "executor" and rpc == "Observe" and response is not None:
            self.world.observations.append(response.observation_id)
        elif rpc == "Check" and response is not None and response.decision_id:
            self.world.decisions.append(response.decision_id)
        elif rpc == "Grant" and response is not None:
            g = response.grant
            self.world.grant_ids.append(g.grant_id)
            verbs = {authz_pb2.Verb.Name(v).removeprefix("VERB_").lower() for v in g.verbs}
            self.world.granted.setdefault((g.principal, g.target), set()).update(verbs)

    def _close_session(self, identity: str, session_id: str) -> None:
        method = executor_pb2.DESCRIPTOR.services_by_name["Executor"].methods_by_name["CloseSession"]
        self.send(Call("executor", method, identity, executor_pb2.CloseSessionRequest(session_id=session_id)))
        if session_id in self.world.sessions[identity]:
            self.world.sessions[identity].remove(session_id)

    def run(self, count: int, *, on_progress: Callable[[int], None] | None = None) -> Stats:
        """Send ``count`` generated calls."""
        strategy = call_strategy(self.world)

        @settings(
            max_examples=count,
            deadline=None,
            database=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        @given(call=strategy)
        def one(call: Call) -> None:
            self.send(call)
            if on_progress is not None:
                on_progress(self.stats.sent)

        one()
        return self.stats


def _short(request: Any) -> str:
    text = repr(request) if isinstance(request, bytes) else str(request).replace("\n", " ")
    return text[:160]


def rss_kb(pid: int) -> int:
    """The resident set size of process ``pid``, in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def timed(seconds: float) -> Iterator[float]:
    """Yield the time left until ``seconds`` have passed."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        yield left
