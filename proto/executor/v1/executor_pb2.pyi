from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASON_UNSPECIFIED: _ClassVar[Reason]
    ALLOW: _ClassVar[Reason]
    UNAUTHENTICATED: _ClassVar[Reason]
    NO_LEASE: _ClassVar[Reason]
    STALE_EPOCH: _ClassVar[Reason]
    HELD_BY_HUMAN: _ClassVar[Reason]
    OUT_OF_SCOPE: _ClassVar[Reason]
    GRANT_EXPIRED: _ClassVar[Reason]
    GRANT_REVOKED: _ClassVar[Reason]
    GRANT_EXHAUSTED: _ClassVar[Reason]
    POLICY_FORBID: _ClassVar[Reason]
    APPROVAL_REQUIRED: _ClassVar[Reason]
    AUTHZ_UNAVAILABLE: _ClassVar[Reason]
    STALE_OBSERVATION: _ClassVar[Reason]
    STALE_REF: _ClassVar[Reason]
    TARGET_CHANGED: _ClassVar[Reason]
    FOCUS_MISMATCH: _ClassVar[Reason]
    IDEMPOTENCY_CONFLICT: _ClassVar[Reason]
    RECONCILE_REQUIRED: _ClassVar[Reason]

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    REFUSED: _ClassVar[Outcome]
    DONE: _ClassVar[Outcome]
    FAILED: _ClassVar[Outcome]
    UNKNOWN: _ClassVar[Outcome]
    RECONCILED: _ClassVar[Outcome]

class ActionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_KIND_UNSPECIFIED: _ClassVar[ActionKind]
    ACTION_CLICK: _ClassVar[ActionKind]
    ACTION_FILL: _ClassVar[ActionKind]
    ACTION_TYPE: _ClassVar[ActionKind]
    ACTION_PRESS: _ClassVar[ActionKind]
    ACTION_SELECT: _ClassVar[ActionKind]
    ACTION_NAVIGATE: _ClassVar[ActionKind]

class Evidence(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVIDENCE_UNSPECIFIED: _ClassVar[Evidence]
    EVIDENCE_NONE: _ClassVar[Evidence]
    EVIDENCE_DISPATCH_RETURNED: _ClassVar[Evidence]
    EVIDENCE_OBSERVED: _ClassVar[Evidence]
    EVIDENCE_VERIFIED: _ClassVar[Evidence]

class Backend(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKEND_UNSPECIFIED: _ClassVar[Backend]
    BACKEND_BROWSER: _ClassVar[Backend]
REASON_UNSPECIFIED: Reason
ALLOW: Reason
UNAUTHENTICATED: Reason
NO_LEASE: Reason
STALE_EPOCH: Reason
HELD_BY_HUMAN: Reason
OUT_OF_SCOPE: Reason
GRANT_EXPIRED: Reason
GRANT_REVOKED: Reason
GRANT_EXHAUSTED: Reason
POLICY_FORBID: Reason
APPROVAL_REQUIRED: Reason
AUTHZ_UNAVAILABLE: Reason
STALE_OBSERVATION: Reason
STALE_REF: Reason
TARGET_CHANGED: Reason
FOCUS_MISMATCH: Reason
IDEMPOTENCY_CONFLICT: Reason
RECONCILE_REQUIRED: Reason
OUTCOME_UNSPECIFIED: Outcome
REFUSED: Outcome
DONE: Outcome
FAILED: Outcome
UNKNOWN: Outcome
RECONCILED: Outcome
ACTION_KIND_UNSPECIFIED: ActionKind
ACTION_CLICK: ActionKind
ACTION_FILL: ActionKind
ACTION_TYPE: ActionKind
ACTION_PRESS: ActionKind
ACTION_SELECT: ActionKind
ACTION_NAVIGATE: ActionKind
EVIDENCE_UNSPECIFIED: Evidence
EVIDENCE_NONE: Evidence
EVIDENCE_DISPATCH_RETURNED: Evidence
EVIDENCE_OBSERVED: Evidence
EVIDENCE_VERIFIED: Evidence
BACKEND_UNSPECIFIED: Backend
BACKEND_BROWSER: Backend

class OpenSessionRequest(_message.Message):
    __slots__ = ("target", "backend", "start_url", "agent")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    START_URL_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    target: str
    backend: Backend
    start_url: str
    agent: str
    def __init__(self, target: _Optional[str] = ..., backend: _Optional[_Union[Backend, str]] = ..., start_url: _Optional[str] = ..., agent: _Optional[str] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "target", "agent", "lease_epoch")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    target: str
    agent: str
    lease_epoch: int
    def __init__(self, session_id: _Optional[str] = ..., target: _Optional[str] = ..., agent: _Optional[str] = ..., lease_epoch: _Optional[int] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ("session_id", "screenshot")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    screenshot: bool
    def __init__(self, session_id: _Optional[str] = ..., screenshot: _Optional[bool] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("observation_id", "session_id", "generation", "lease_epoch", "url", "title", "snapshot", "screenshot_png", "digest", "taken_at_ms")
    OBSERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_PNG_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    TAKEN_AT_MS_FIELD_NUMBER: _ClassVar[int]
    observation_id: str
    session_id: str
    generation: int
    lease_epoch: int
    url: str
    title: str
    snapshot: str
    screenshot_png: bytes
    digest: str
    taken_at_ms: int
    def __init__(self, observation_id: _Optional[str] = ..., session_id: _Optional[str] = ..., generation: _Optional[int] = ..., lease_epoch: _Optional[int] = ..., url: _Optional[str] = ..., title: _Optional[str] = ..., snapshot: _Optional[str] = ..., screenshot_png: _Optional[bytes] = ..., digest: _Optional[str] = ..., taken_at_ms: _Optional[int] = ...) -> None: ...

class Expectation(_message.Message):
    __slots__ = ("text_visible", "url_matches")
    TEXT_VISIBLE_FIELD_NUMBER: _ClassVar[int]
    URL_MATCHES_FIELD_NUMBER: _ClassVar[int]
    text_visible: str
    url_matches: str
    def __init__(self, text_visible: _Optional[str] = ..., url_matches: _Optional[str] = ...) -> None: ...

class ActRequest(_message.Message):
    __slots__ = ("session_id", "observation_id", "kind", "ref", "text", "key", "values", "url", "idempotency_key", "expect", "timeout_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    observation_id: str
    kind: ActionKind
    ref: str
    text: str
    key: str
    values: _containers.RepeatedScalarFieldContainer[str]
    url: str
    idempotency_key: str
    expect: Expectation
    timeout_ms: int
    def __init__(self, session_id: _Optional[str] = ..., observation_id: _Optional[str] = ..., kind: _Optional[_Union[ActionKind, str]] = ..., ref: _Optional[str] = ..., text: _Optional[str] = ..., key: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ..., url: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., expect: _Optional[_Union[Expectation, _Mapping]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ActionResult(_message.Message):
    __slots__ = ("action_id", "outcome", "reason", "message", "execution_started", "evidence", "decision_id", "idempotency_key")
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_STARTED_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    action_id: str
    outcome: Outcome
    reason: Reason
    message: str
    execution_started: bool
    evidence: Evidence
    decision_id: str
    idempotency_key: str
    def __init__(self, action_id: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., execution_started: _Optional[bool] = ..., evidence: _Optional[_Union[Evidence, str]] = ..., decision_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ActResponse(_message.Message):
    __slots__ = ("result", "observation")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    result: ActionResult
    observation: Observation
    def __init__(self, result: _Optional[_Union[ActionResult, _Mapping]] = ..., observation: _Optional[_Union[Observation, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
