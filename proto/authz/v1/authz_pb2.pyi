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
    APPROVAL_DENIED: _ClassVar[Reason]
    APPROVAL_EXPIRED: _ClassVar[Reason]

class ApprovalStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPROVAL_STATUS_UNSPECIFIED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_PENDING: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_APPROVED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_DENIED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_EXPIRED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_USED: _ClassVar[ApprovalStatus]

class Verb(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERB_UNSPECIFIED: _ClassVar[Verb]
    VERB_READ: _ClassVar[Verb]
    VERB_INPUT: _ClassVar[Verb]
    VERB_NAVIGATE: _ClassVar[Verb]
    VERB_SUBMIT: _ClassVar[Verb]
    VERB_PURCHASE: _ClassVar[Verb]
    VERB_DELETE: _ClassVar[Verb]
    VERB_UPLOAD: _ClassVar[Verb]
    VERB_DOWNLOAD: _ClassVar[Verb]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_AGENT: _ClassVar[Role]
    ROLE_OPERATOR: _ClassVar[Role]
    ROLE_EXECUTOR: _ClassVar[Role]
    ROLE_ADMIN: _ClassVar[Role]

class HolderKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOLDER_KIND_UNSPECIFIED: _ClassVar[HolderKind]
    HOLDER_AGENT: _ClassVar[HolderKind]
    HOLDER_HUMAN: _ClassVar[HolderKind]

class GrantState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GRANT_STATE_UNSPECIFIED: _ClassVar[GrantState]
    GRANT_STATE_ACTIVE: _ClassVar[GrantState]
    GRANT_STATE_REVOKED: _ClassVar[GrantState]
    GRANT_STATE_EXPIRED: _ClassVar[GrantState]
    GRANT_STATE_EXHAUSTED: _ClassVar[GrantState]
    GRANT_STATE_CLOSED: _ClassVar[GrantState]

class PrincipalState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRINCIPAL_STATE_UNSPECIFIED: _ClassVar[PrincipalState]
    PRINCIPAL_STATE_ACTIVE: _ClassVar[PrincipalState]
    PRINCIPAL_STATE_REVOKED: _ClassVar[PrincipalState]
    PRINCIPAL_STATE_EXPIRED: _ClassVar[PrincipalState]

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    EVENT_KIND_LEASE: _ClassVar[EventKind]
    EVENT_KIND_GRANT: _ClassVar[EventKind]
    EVENT_KIND_APPROVAL: _ClassVar[EventKind]
    EVENT_KIND_POLICY: _ClassVar[EventKind]

class Change(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANGE_UNSPECIFIED: _ClassVar[Change]
    CHANGE_ACQUIRE: _ClassVar[Change]
    CHANGE_RENEW: _ClassVar[Change]
    CHANGE_RELEASE: _ClassVar[Change]
    CHANGE_TAKEOVER: _ClassVar[Change]
    CHANGE_HANDBACK: _ClassVar[Change]
    CHANGE_ACTIVITY: _ClassVar[Change]
    CHANGE_EXPIRE: _ClassVar[Change]
    CHANGE_RESYNC: _ClassVar[Change]
    CHANGE_GRANT: _ClassVar[Change]
    CHANGE_REVOKE: _ClassVar[Change]
    CHANGE_CONSUME: _ClassVar[Change]
    CHANGE_CLOSE: _ClassVar[Change]
    CHANGE_CREATE: _ClassVar[Change]
    CHANGE_APPROVE: _ClassVar[Change]
    CHANGE_DENY: _ClassVar[Change]
    CHANGE_USE: _ClassVar[Change]
    CHANGE_RELOAD: _ClassVar[Change]
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
APPROVAL_DENIED: Reason
APPROVAL_EXPIRED: Reason
APPROVAL_STATUS_UNSPECIFIED: ApprovalStatus
APPROVAL_STATUS_PENDING: ApprovalStatus
APPROVAL_STATUS_APPROVED: ApprovalStatus
APPROVAL_STATUS_DENIED: ApprovalStatus
APPROVAL_STATUS_EXPIRED: ApprovalStatus
APPROVAL_STATUS_USED: ApprovalStatus
VERB_UNSPECIFIED: Verb
VERB_READ: Verb
VERB_INPUT: Verb
VERB_NAVIGATE: Verb
VERB_SUBMIT: Verb
VERB_PURCHASE: Verb
VERB_DELETE: Verb
VERB_UPLOAD: Verb
VERB_DOWNLOAD: Verb
ROLE_UNSPECIFIED: Role
ROLE_AGENT: Role
ROLE_OPERATOR: Role
ROLE_EXECUTOR: Role
ROLE_ADMIN: Role
HOLDER_KIND_UNSPECIFIED: HolderKind
HOLDER_AGENT: HolderKind
HOLDER_HUMAN: HolderKind
GRANT_STATE_UNSPECIFIED: GrantState
GRANT_STATE_ACTIVE: GrantState
GRANT_STATE_REVOKED: GrantState
GRANT_STATE_EXPIRED: GrantState
GRANT_STATE_EXHAUSTED: GrantState
GRANT_STATE_CLOSED: GrantState
PRINCIPAL_STATE_UNSPECIFIED: PrincipalState
PRINCIPAL_STATE_ACTIVE: PrincipalState
PRINCIPAL_STATE_REVOKED: PrincipalState
PRINCIPAL_STATE_EXPIRED: PrincipalState
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_LEASE: EventKind
EVENT_KIND_GRANT: EventKind
EVENT_KIND_APPROVAL: EventKind
EVENT_KIND_POLICY: EventKind
CHANGE_UNSPECIFIED: Change
CHANGE_ACQUIRE: Change
CHANGE_RENEW: Change
CHANGE_RELEASE: Change
CHANGE_TAKEOVER: Change
CHANGE_HANDBACK: Change
CHANGE_ACTIVITY: Change
CHANGE_EXPIRE: Change
CHANGE_RESYNC: Change
CHANGE_GRANT: Change
CHANGE_REVOKE: Change
CHANGE_CONSUME: Change
CHANGE_CLOSE: Change
CHANGE_CREATE: Change
CHANGE_APPROVE: Change
CHANGE_DENY: Change
CHANGE_USE: Change
CHANGE_RELOAD: Change

class Resource(_message.Message):
    __slots__ = ("url", "element_role", "element_name", "window_class", "window_title", "password_field", "dialog_title", "form_name", "heading", "description", "document_load", "visible_text")
    URL_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_ROLE_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    WINDOW_CLASS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_TITLE_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_FIELD_NUMBER: _ClassVar[int]
    DIALOG_TITLE_FIELD_NUMBER: _ClassVar[int]
    FORM_NAME_FIELD_NUMBER: _ClassVar[int]
    HEADING_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_LOAD_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_TEXT_FIELD_NUMBER: _ClassVar[int]
    url: str
    element_role: str
    element_name: str
    window_class: str
    window_title: str
    password_field: bool
    dialog_title: str
    form_name: str
    heading: str
    description: str
    document_load: bool
    visible_text: str
    def __init__(self, url: _Optional[str] = ..., element_role: _Optional[str] = ..., element_name: _Optional[str] = ..., window_class: _Optional[str] = ..., window_title: _Optional[str] = ..., password_field: _Optional[bool] = ..., dialog_title: _Optional[str] = ..., form_name: _Optional[str] = ..., heading: _Optional[str] = ..., description: _Optional[str] = ..., document_load: _Optional[bool] = ..., visible_text: _Optional[str] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("principal", "target", "lease_epoch", "verb", "resource", "action_id", "fingerprint", "observation_id", "approval_asked")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    VERB_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ASKED_FIELD_NUMBER: _ClassVar[int]
    principal: str
    target: str
    lease_epoch: int
    verb: Verb
    resource: Resource
    action_id: str
    fingerprint: str
    observation_id: str
    approval_asked: str
    def __init__(self, principal: _Optional[str] = ..., target: _Optional[str] = ..., lease_epoch: _Optional[int] = ..., verb: _Optional[_Union[Verb, str]] = ..., resource: _Optional[_Union[Resource, _Mapping]] = ..., action_id: _Optional[str] = ..., fingerprint: _Optional[str] = ..., observation_id: _Optional[str] = ..., approval_asked: _Optional[str] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ("allow", "reason", "message", "decision_id", "policies", "grant_id", "lease_epoch", "approval_id", "shadow_policies", "grant_consumed", "idempotency_header", "replayed")
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    SHADOW_POLICIES_FIELD_NUMBER: _ClassVar[int]
    GRANT_CONSUMED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_HEADER_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    allow: bool
    reason: Reason
    message: str
    decision_id: str
    policies: _containers.RepeatedScalarFieldContainer[str]
    grant_id: str
    lease_epoch: int
    approval_id: str
    shadow_policies: _containers.RepeatedScalarFieldContainer[str]
    grant_consumed: bool
    idempotency_header: bool
    replayed: bool
    def __init__(self, allow: _Optional[bool] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., decision_id: _Optional[str] = ..., policies: _Optional[_Iterable[str]] = ..., grant_id: _Optional[str] = ..., lease_epoch: _Optional[int] = ..., approval_id: _Optional[str] = ..., shadow_policies: _Optional[_Iterable[str]] = ..., grant_consumed: _Optional[bool] = ..., idempotency_header: _Optional[bool] = ..., replayed: _Optional[bool] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("grant_id", "principal", "target", "verbs", "origins", "expires_at_ms", "granted_by", "note", "created_at_ms", "revoked", "path_globs", "role_patterns", "name_patterns", "window_class_patterns", "window_title_patterns", "allow_password_input", "single_use", "task_id", "require_approval_verbs", "approval_timeout_ms", "revoked_at_ms", "used_at_ms", "closed_at_ms", "state", "grant_state", "idempotency_header")
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    VERBS_FIELD_NUMBER: _ClassVar[int]
    ORIGINS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    GRANTED_BY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    PATH_GLOBS_FIELD_NUMBER: _ClassVar[int]
    ROLE_PATTERNS_FIELD_NUMBER: _ClassVar[int]
    NAME_PATTERNS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_CLASS_PATTERNS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_TITLE_PATTERNS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_PASSWORD_INPUT_FIELD_NUMBER: _ClassVar[int]
    SINGLE_USE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_APPROVAL_VERBS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    USED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    GRANT_STATE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_HEADER_FIELD_NUMBER: _ClassVar[int]
    grant_id: str
    principal: str
    target: str
    verbs: _containers.RepeatedScalarFieldContainer[Verb]
    origins: _containers.RepeatedScalarFieldContainer[str]
    expires_at_ms: int
    granted_by: str
    note: str
    created_at_ms: int
    revoked: bool
    path_globs: _containers.RepeatedScalarFieldContainer[str]
    role_patterns: _containers.RepeatedScalarFieldContainer[str]
    name_patterns: _containers.RepeatedScalarFieldContainer[str]
    window_class_patterns: _containers.RepeatedScalarFieldContainer[str]
    window_title_patterns: _containers.RepeatedScalarFieldContainer[str]
    allow_password_input: bool
    single_use: bool
    task_id: str
    require_approval_verbs: _containers.RepeatedScalarFieldContainer[Verb]
    approval_timeout_ms: int
    revoked_at_ms: int
    used_at_ms: int
    closed_at_ms: int
    state: str
    grant_state: GrantState
    idempotency_header: bool
    def __init__(self, grant_id: _Optional[str] = ..., principal: _Optional[str] = ..., target: _Optional[str] = ..., verbs: _Optional[_Iterable[_Union[Verb, str]]] = ..., origins: _Optional[_Iterable[str]] = ..., expires_at_ms: _Optional[int] = ..., granted_by: _Optional[str] = ..., note: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., revoked: _Optional[bool] = ..., path_globs: _Optional[_Iterable[str]] = ..., role_patterns: _Optional[_Iterable[str]] = ..., name_patterns: _Optional[_Iterable[str]] = ..., window_class_patterns: _Optional[_Iterable[str]] = ..., window_title_patterns: _Optional[_Iterable[str]] = ..., allow_password_input: _Optional[bool] = ..., single_use: _Optional[bool] = ..., task_id: _Optional[str] = ..., require_approval_verbs: _Optional[_Iterable[_Union[Verb, str]]] = ..., approval_timeout_ms: _Optional[int] = ..., revoked_at_ms: _Optional[int] = ..., used_at_ms: _Optional[int] = ..., closed_at_ms: _Optional[int] = ..., state: _Optional[str] = ..., grant_state: _Optional[_Union[GrantState, str]] = ..., idempotency_header: _Optional[bool] = ...) -> None: ...

class GrantRequest(_message.Message):
    __slots__ = ("grant", "ttl_ms")
    GRANT_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    ttl_ms: int
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class GrantResponse(_message.Message):
    __slots__ = ("grant",)
    GRANT_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class RevokeRequest(_message.Message):
    __slots__ = ("grant_id",)
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    grant_id: str
    def __init__(self, grant_id: _Optional[str] = ...) -> None: ...

class RevokeResponse(_message.Message):
    __slots__ = ("grant",)
    GRANT_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class ListGrantsRequest(_message.Message):
    __slots__ = ("principal", "target", "include_inactive")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INACTIVE_FIELD_NUMBER: _ClassVar[int]
    principal: str
    target: str
    include_inactive: bool
    def __init__(self, principal: _Optional[str] = ..., target: _Optional[str] = ..., include_inactive: _Optional[bool] = ...) -> None: ...

class ListGrantsResponse(_message.Message):
    __slots__ = ("grants",)
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("target", "holder_kind", "holder", "epoch", "expires_at_ms", "next_holder")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    HOLDER_KIND_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_HOLDER_FIELD_NUMBER: _ClassVar[int]
    target: str
    holder_kind: HolderKind
    holder: str
    epoch: int
    expires_at_ms: int
    next_holder: str
    def __init__(self, target: _Optional[str] = ..., holder_kind: _Optional[_Union[HolderKind, str]] = ..., holder: _Optional[str] = ..., epoch: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., next_holder: _Optional[str] = ...) -> None: ...

class AcquireRequest(_message.Message):
    __slots__ = ("target", "holder", "ttl_ms")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    target: str
    holder: str
    ttl_ms: int
    def __init__(self, target: _Optional[str] = ..., holder: _Optional[str] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ("target", "holder", "epoch", "ttl_ms")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    target: str
    holder: str
    epoch: int
    ttl_ms: int
    def __init__(self, target: _Optional[str] = ..., holder: _Optional[str] = ..., epoch: _Optional[int] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("target", "holder", "epoch")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    target: str
    holder: str
    epoch: int
    def __init__(self, target: _Optional[str] = ..., holder: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class TakeOverRequest(_message.Message):
    __slots__ = ("target", "ttl_ms", "note")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    target: str
    ttl_ms: int
    note: str
    def __init__(self, target: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class HandBackRequest(_message.Message):
    __slots__ = ("target", "epoch", "next_holder")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEXT_HOLDER_FIELD_NUMBER: _ClassVar[int]
    target: str
    epoch: int
    next_holder: str
    def __init__(self, target: _Optional[str] = ..., epoch: _Optional[int] = ..., next_holder: _Optional[str] = ...) -> None: ...

class GetLeaseRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: str
    def __init__(self, target: _Optional[str] = ...) -> None: ...

class ReportActivityRequest(_message.Message):
    __slots__ = ("target", "note", "ttl_ms")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    target: str
    note: str
    ttl_ms: int
    def __init__(self, target: _Optional[str] = ..., note: _Optional[str] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class ExpireLeaseRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: str
    def __init__(self, target: _Optional[str] = ...) -> None: ...

class LeaseResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("principal", "role", "expires_at_ms")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    principal: str
    role: Role
    expires_at_ms: int
    def __init__(self, principal: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class CloseTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class CloseTaskResponse(_message.Message):
    __slots__ = ("grants",)
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class Approval(_message.Message):
    __slots__ = ("approval_id", "principal", "target", "fingerprint", "status", "deadline_ms", "decided_by", "note", "verb", "resource", "lease_epoch", "observation_id", "action_id", "grant_id", "policies", "created_at_ms", "decided_at_ms", "used_at_ms", "decision_id", "used_by_decision_id")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    VERB_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    USED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    USED_BY_DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    principal: str
    target: str
    fingerprint: str
    status: ApprovalStatus
    deadline_ms: int
    decided_by: str
    note: str
    verb: Verb
    resource: Resource
    lease_epoch: int
    observation_id: str
    action_id: str
    grant_id: str
    policies: _containers.RepeatedScalarFieldContainer[str]
    created_at_ms: int
    decided_at_ms: int
    used_at_ms: int
    decision_id: str
    used_by_decision_id: str
    def __init__(self, approval_id: _Optional[str] = ..., principal: _Optional[str] = ..., target: _Optional[str] = ..., fingerprint: _Optional[str] = ..., status: _Optional[_Union[ApprovalStatus, str]] = ..., deadline_ms: _Optional[int] = ..., decided_by: _Optional[str] = ..., note: _Optional[str] = ..., verb: _Optional[_Union[Verb, str]] = ..., resource: _Optional[_Union[Resource, _Mapping]] = ..., lease_epoch: _Optional[int] = ..., observation_id: _Optional[str] = ..., action_id: _Optional[str] = ..., grant_id: _Optional[str] = ..., policies: _Optional[_Iterable[str]] = ..., created_at_ms: _Optional[int] = ..., decided_at_ms: _Optional[int] = ..., used_at_ms: _Optional[int] = ..., decision_id: _Optional[str] = ..., used_by_decision_id: _Optional[str] = ...) -> None: ...

class ApproveRequest(_message.Message):
    __slots__ = ("approval_id", "note")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    note: str
    def __init__(self, approval_id: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class DenyRequest(_message.Message):
    __slots__ = ("approval_id", "note")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    note: str
    def __init__(self, approval_id: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class GetApprovalRequest(_message.Message):
    __slots__ = ("approval_id",)
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    def __init__(self, approval_id: _Optional[str] = ...) -> None: ...

class ApprovalResponse(_message.Message):
    __slots__ = ("approval",)
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    approval: Approval
    def __init__(self, approval: _Optional[_Union[Approval, _Mapping]] = ...) -> None: ...

class ListApprovalsRequest(_message.Message):
    __slots__ = ("status", "principal", "target", "limit")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    status: ApprovalStatus
    principal: str
    target: str
    limit: int
    def __init__(self, status: _Optional[_Union[ApprovalStatus, str]] = ..., principal: _Optional[str] = ..., target: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListApprovalsResponse(_message.Message):
    __slots__ = ("approvals",)
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    approvals: _containers.RepeatedCompositeFieldContainer[Approval]
    def __init__(self, approvals: _Optional[_Iterable[_Union[Approval, _Mapping]]] = ...) -> None: ...

class ReloadPoliciesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReloadPoliciesResponse(_message.Message):
    __slots__ = ("policy_ids", "shadow_policy_ids", "loaded_at_ms")
    POLICY_IDS_FIELD_NUMBER: _ClassVar[int]
    SHADOW_POLICY_IDS_FIELD_NUMBER: _ClassVar[int]
    LOADED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    policy_ids: _containers.RepeatedScalarFieldContainer[str]
    shadow_policy_ids: _containers.RepeatedScalarFieldContainer[str]
    loaded_at_ms: int
    def __init__(self, policy_ids: _Optional[_Iterable[str]] = ..., shadow_policy_ids: _Optional[_Iterable[str]] = ..., loaded_at_ms: _Optional[int] = ...) -> None: ...

class DecisionRecord(_message.Message):
    __slots__ = ("decision_id", "at_ms", "caller", "principal", "target", "lease_epoch", "verb", "resource", "action_id", "fingerprint", "observation_id", "allow", "reason", "message", "policies", "grant_id", "grant_consumed", "approval_id", "current_epoch", "shadow_policies", "lease", "grants_considered")
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    VERB_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    GRANT_CONSUMED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SHADOW_POLICIES_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    GRANTS_CONSIDERED_FIELD_NUMBER: _ClassVar[int]
    decision_id: str
    at_ms: int
    caller: str
    principal: str
    target: str
    lease_epoch: int
    verb: Verb
    resource: Resource
    action_id: str
    fingerprint: str
    observation_id: str
    allow: bool
    reason: Reason
    message: str
    policies: _containers.RepeatedScalarFieldContainer[str]
    grant_id: str
    grant_consumed: bool
    approval_id: str
    current_epoch: int
    shadow_policies: _containers.RepeatedScalarFieldContainer[str]
    lease: Lease
    grants_considered: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, decision_id: _Optional[str] = ..., at_ms: _Optional[int] = ..., caller: _Optional[str] = ..., principal: _Optional[str] = ..., target: _Optional[str] = ..., lease_epoch: _Optional[int] = ..., verb: _Optional[_Union[Verb, str]] = ..., resource: _Optional[_Union[Resource, _Mapping]] = ..., action_id: _Optional[str] = ..., fingerprint: _Optional[str] = ..., observation_id: _Optional[str] = ..., allow: _Optional[bool] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., policies: _Optional[_Iterable[str]] = ..., grant_id: _Optional[str] = ..., grant_consumed: _Optional[bool] = ..., approval_id: _Optional[str] = ..., current_epoch: _Optional[int] = ..., shadow_policies: _Optional[_Iterable[str]] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., grants_considered: _Optional[_Iterable[str]] = ...) -> None: ...

class ExplainDecisionRequest(_message.Message):
    __slots__ = ("decision_id",)
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    decision_id: str
    def __init__(self, decision_id: _Optional[str] = ...) -> None: ...

class ExplainDecisionResponse(_message.Message):
    __slots__ = ("decision", "text")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    decision: DecisionRecord
    text: str
    def __init__(self, decision: _Optional[_Union[DecisionRecord, _Mapping]] = ..., text: _Optional[str] = ...) -> None: ...

class ListDecisionsRequest(_message.Message):
    __slots__ = ("principal", "target", "reason", "since_ms", "limit")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    principal: str
    target: str
    reason: Reason
    since_ms: int
    limit: int
    def __init__(self, principal: _Optional[str] = ..., target: _Optional[str] = ..., reason: _Optional[_Union[Reason, str]] = ..., since_ms: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ListDecisionsResponse(_message.Message):
    __slots__ = ("decisions",)
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    decisions: _containers.RepeatedCompositeFieldContainer[DecisionRecord]
    def __init__(self, decisions: _Optional[_Iterable[_Union[DecisionRecord, _Mapping]]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("targets", "since_seq")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    SINCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    targets: _containers.RepeatedScalarFieldContainer[str]
    since_seq: int
    def __init__(self, targets: _Optional[_Iterable[str]] = ..., since_seq: _Optional[int] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("seq", "kind", "target", "lease", "grant", "approval", "at_ms", "change", "event_kind", "event_change")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KIND_FIELD_NUMBER: _ClassVar[int]
    EVENT_CHANGE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    kind: str
    target: str
    lease: Lease
    grant: Grant
    approval: Approval
    at_ms: int
    change: str
    event_kind: EventKind
    event_change: Change
    def __init__(self, seq: _Optional[int] = ..., kind: _Optional[str] = ..., target: _Optional[str] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., grant: _Optional[_Union[Grant, _Mapping]] = ..., approval: _Optional[_Union[Approval, _Mapping]] = ..., at_ms: _Optional[int] = ..., change: _Optional[str] = ..., event_kind: _Optional[_Union[EventKind, str]] = ..., event_change: _Optional[_Union[Change, str]] = ...) -> None: ...

class Principal(_message.Message):
    __slots__ = ("name", "role", "created_at_ms", "expires_at_ms", "revoked_at_ms", "state")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: Role
    created_at_ms: int
    expires_at_ms: int
    revoked_at_ms: int
    state: PrincipalState
    def __init__(self, name: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., created_at_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., revoked_at_ms: _Optional[int] = ..., state: _Optional[_Union[PrincipalState, str]] = ...) -> None: ...

class ListPrincipalsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPrincipalsResponse(_message.Message):
    __slots__ = ("principals",)
    PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    principals: _containers.RepeatedCompositeFieldContainer[Principal]
    def __init__(self, principals: _Optional[_Iterable[_Union[Principal, _Mapping]]] = ...) -> None: ...

class RevokePrincipalRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RotateTokenRequest(_message.Message):
    __slots__ = ("name", "expires_at_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    expires_at_ms: int
    def __init__(self, name: _Optional[str] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class PrincipalResponse(_message.Message):
    __slots__ = ("principal", "token")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    principal: Principal
    token: str
    def __init__(self, principal: _Optional[_Union[Principal, _Mapping]] = ..., token: _Optional[str] = ...) -> None: ...

class ListLeasesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListLeasesResponse(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    def __init__(self, leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ...) -> None: ...
