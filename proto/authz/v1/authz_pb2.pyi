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

class Resource(_message.Message):
    __slots__ = ("url", "element_role", "element_name", "window_class", "window_title", "password_field")
    URL_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_ROLE_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    WINDOW_CLASS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_TITLE_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_FIELD_NUMBER: _ClassVar[int]
    url: str
    element_role: str
    element_name: str
    window_class: str
    window_title: str
    password_field: bool
    def __init__(self, url: _Optional[str] = ..., element_role: _Optional[str] = ..., element_name: _Optional[str] = ..., window_class: _Optional[str] = ..., window_title: _Optional[str] = ..., password_field: _Optional[bool] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("principal", "target", "lease_epoch", "verb", "resource", "action_id")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    VERB_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    principal: str
    target: str
    lease_epoch: int
    verb: Verb
    resource: Resource
    action_id: str
    def __init__(self, principal: _Optional[str] = ..., target: _Optional[str] = ..., lease_epoch: _Optional[int] = ..., verb: _Optional[_Union[Verb, str]] = ..., resource: _Optional[_Union[Resource, _Mapping]] = ..., action_id: _Optional[str] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ("allow", "reason", "message", "decision_id", "policies", "grant_id", "lease_epoch")
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    allow: bool
    reason: Reason
    message: str
    decision_id: str
    policies: _containers.RepeatedScalarFieldContainer[str]
    grant_id: str
    lease_epoch: int
    def __init__(self, allow: _Optional[bool] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., decision_id: _Optional[str] = ..., policies: _Optional[_Iterable[str]] = ..., grant_id: _Optional[str] = ..., lease_epoch: _Optional[int] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("grant_id", "principal", "target", "verbs", "origins", "expires_at_ms", "granted_by", "note", "created_at_ms", "revoked")
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
    def __init__(self, grant_id: _Optional[str] = ..., principal: _Optional[str] = ..., target: _Optional[str] = ..., verbs: _Optional[_Iterable[_Union[Verb, str]]] = ..., origins: _Optional[_Iterable[str]] = ..., expires_at_ms: _Optional[int] = ..., granted_by: _Optional[str] = ..., note: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., revoked: _Optional[bool] = ...) -> None: ...

class GrantRequest(_message.Message):
    __slots__ = ("grant",)
    GRANT_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

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

class LeaseResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("principal", "role")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    principal: str
    role: Role
    def __init__(self, principal: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ...) -> None: ...
