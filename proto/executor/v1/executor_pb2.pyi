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
    STALE_OBSERVATION: _ClassVar[Reason]
    STALE_REF: _ClassVar[Reason]
    TARGET_CHANGED: _ClassVar[Reason]
    FOCUS_MISMATCH: _ClassVar[Reason]
    IDEMPOTENCY_CONFLICT: _ClassVar[Reason]
    RECONCILE_REQUIRED: _ClassVar[Reason]
    TARGET_GONE: _ClassVar[Reason]

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
    ACTION_DOUBLE_CLICK: _ClassVar[ActionKind]
    ACTION_HOVER: _ClassVar[ActionKind]
    ACTION_CHECK: _ClassVar[ActionKind]
    ACTION_UNCHECK: _ClassVar[ActionKind]
    ACTION_SCROLL: _ClassVar[ActionKind]
    ACTION_BACK: _ClassVar[ActionKind]
    ACTION_UPLOAD: _ClassVar[ActionKind]
    ACTION_WAIT_FOR: _ClassVar[ActionKind]
    ACTION_TAB_OPEN: _ClassVar[ActionKind]
    ACTION_TAB_SWITCH: _ClassVar[ActionKind]
    ACTION_TAB_CLOSE: _ClassVar[ActionKind]
    ACTION_DIALOG_ACCEPT: _ClassVar[ActionKind]
    ACTION_DIALOG_DISMISS: _ClassVar[ActionKind]
    ACTION_HOTKEY: _ClassVar[ActionKind]
    ACTION_MOVE: _ClassVar[ActionKind]
    ACTION_DRAG: _ClassVar[ActionKind]
    ACTION_ACTIVATE: _ClassVar[ActionKind]

class Evidence(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVIDENCE_UNSPECIFIED: _ClassVar[Evidence]
    EVIDENCE_NONE: _ClassVar[Evidence]
    EVIDENCE_DISPATCH_RETURNED: _ClassVar[Evidence]
    EVIDENCE_OBSERVED: _ClassVar[Evidence]
    EVIDENCE_VERIFIED: _ClassVar[Evidence]
    EVIDENCE_RECONCILED: _ClassVar[Evidence]

class Backend(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKEND_UNSPECIFIED: _ClassVar[Backend]
    BACKEND_BROWSER: _ClassVar[Backend]
    BACKEND_DESKTOP: _ClassVar[Backend]

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNSPECIFIED: _ClassVar[Verdict]
    HAPPENED: _ClassVar[Verdict]
    DID_NOT_HAPPEN: _ClassVar[Verdict]

class DialogType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DIALOG_TYPE_UNSPECIFIED: _ClassVar[DialogType]
    DIALOG_TYPE_ALERT: _ClassVar[DialogType]
    DIALOG_TYPE_CONFIRM: _ClassVar[DialogType]
    DIALOG_TYPE_PROMPT: _ClassVar[DialogType]
    DIALOG_TYPE_BEFOREUNLOAD: _ClassVar[DialogType]

class BatchStop(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BATCH_STOP_UNSPECIFIED: _ClassVar[BatchStop]
    BATCH_STOP_NOT_DONE: _ClassVar[BatchStop]
    BATCH_STOP_SURFACE_CHANGED: _ClassVar[BatchStop]

class SessionEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_EVENT_KIND_UNSPECIFIED: _ClassVar[SessionEventKind]
    SESSION_EVENT_ATTACHED: _ClassVar[SessionEventKind]
    SESSION_EVENT_LEASE_CHANGED: _ClassVar[SessionEventKind]
    SESSION_EVENT_CLOSED: _ClassVar[SessionEventKind]

class PointSpace(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    POINT_SPACE_UNSPECIFIED: _ClassVar[PointSpace]
    POINT_SPACE_SCREENSHOT: _ClassVar[PointSpace]
    POINT_SPACE_CSS: _ClassVar[PointSpace]

class PersonRequestStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PERSON_REQUEST_STATUS_UNSPECIFIED: _ClassVar[PersonRequestStatus]
    PERSON_WAITING: _ClassVar[PersonRequestStatus]
    PERSON_WITH_PERSON: _ClassVar[PersonRequestStatus]
    PERSON_HANDED_BACK: _ClassVar[PersonRequestStatus]
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
STALE_OBSERVATION: Reason
STALE_REF: Reason
TARGET_CHANGED: Reason
FOCUS_MISMATCH: Reason
IDEMPOTENCY_CONFLICT: Reason
RECONCILE_REQUIRED: Reason
TARGET_GONE: Reason
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
ACTION_DOUBLE_CLICK: ActionKind
ACTION_HOVER: ActionKind
ACTION_CHECK: ActionKind
ACTION_UNCHECK: ActionKind
ACTION_SCROLL: ActionKind
ACTION_BACK: ActionKind
ACTION_UPLOAD: ActionKind
ACTION_WAIT_FOR: ActionKind
ACTION_TAB_OPEN: ActionKind
ACTION_TAB_SWITCH: ActionKind
ACTION_TAB_CLOSE: ActionKind
ACTION_DIALOG_ACCEPT: ActionKind
ACTION_DIALOG_DISMISS: ActionKind
ACTION_HOTKEY: ActionKind
ACTION_MOVE: ActionKind
ACTION_DRAG: ActionKind
ACTION_ACTIVATE: ActionKind
EVIDENCE_UNSPECIFIED: Evidence
EVIDENCE_NONE: Evidence
EVIDENCE_DISPATCH_RETURNED: Evidence
EVIDENCE_OBSERVED: Evidence
EVIDENCE_VERIFIED: Evidence
EVIDENCE_RECONCILED: Evidence
BACKEND_UNSPECIFIED: Backend
BACKEND_BROWSER: Backend
BACKEND_DESKTOP: Backend
VERDICT_UNSPECIFIED: Verdict
HAPPENED: Verdict
DID_NOT_HAPPEN: Verdict
DIALOG_TYPE_UNSPECIFIED: DialogType
DIALOG_TYPE_ALERT: DialogType
DIALOG_TYPE_CONFIRM: DialogType
DIALOG_TYPE_PROMPT: DialogType
DIALOG_TYPE_BEFOREUNLOAD: DialogType
BATCH_STOP_UNSPECIFIED: BatchStop
BATCH_STOP_NOT_DONE: BatchStop
BATCH_STOP_SURFACE_CHANGED: BatchStop
SESSION_EVENT_KIND_UNSPECIFIED: SessionEventKind
SESSION_EVENT_ATTACHED: SessionEventKind
SESSION_EVENT_LEASE_CHANGED: SessionEventKind
SESSION_EVENT_CLOSED: SessionEventKind
POINT_SPACE_UNSPECIFIED: PointSpace
POINT_SPACE_SCREENSHOT: PointSpace
POINT_SPACE_CSS: PointSpace
PERSON_REQUEST_STATUS_UNSPECIFIED: PersonRequestStatus
PERSON_WAITING: PersonRequestStatus
PERSON_WITH_PERSON: PersonRequestStatus
PERSON_HANDED_BACK: PersonRequestStatus

class DesktopTarget(_message.Message):
    __slots__ = ("display", "window_id", "pid", "wm_class", "title_pattern")
    DISPLAY_FIELD_NUMBER: _ClassVar[int]
    WINDOW_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    WM_CLASS_FIELD_NUMBER: _ClassVar[int]
    TITLE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    display: str
    window_id: int
    pid: int
    wm_class: str
    title_pattern: str
    def __init__(self, display: _Optional[str] = ..., window_id: _Optional[int] = ..., pid: _Optional[int] = ..., wm_class: _Optional[str] = ..., title_pattern: _Optional[str] = ...) -> None: ...

class OpenSessionRequest(_message.Message):
    __slots__ = ("target", "backend", "start_url", "agent", "desktop", "session_ttl_ms")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    START_URL_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    DESKTOP_FIELD_NUMBER: _ClassVar[int]
    SESSION_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    target: str
    backend: Backend
    start_url: str
    agent: str
    desktop: DesktopTarget
    session_ttl_ms: int
    def __init__(self, target: _Optional[str] = ..., backend: _Optional[_Union[Backend, str]] = ..., start_url: _Optional[str] = ..., agent: _Optional[str] = ..., desktop: _Optional[_Union[DesktopTarget, _Mapping]] = ..., session_ttl_ms: _Optional[int] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "target", "agent", "lease_epoch", "lease_reason", "session_ttl_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEASE_REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    target: str
    agent: str
    lease_epoch: int
    lease_reason: Reason
    session_ttl_ms: int
    def __init__(self, session_id: _Optional[str] = ..., target: _Optional[str] = ..., agent: _Optional[str] = ..., lease_epoch: _Optional[int] = ..., lease_reason: _Optional[_Union[Reason, str]] = ..., session_ttl_ms: _Optional[int] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ("session_id", "screenshot", "screenshot_scale", "viewport_only", "depth", "diff")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_SCALE_FIELD_NUMBER: _ClassVar[int]
    VIEWPORT_ONLY_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    screenshot: bool
    screenshot_scale: float
    viewport_only: bool
    depth: int
    diff: bool
    def __init__(self, session_id: _Optional[str] = ..., screenshot: _Optional[bool] = ..., screenshot_scale: _Optional[float] = ..., viewport_only: _Optional[bool] = ..., depth: _Optional[int] = ..., diff: _Optional[bool] = ...) -> None: ...

class Tab(_message.Message):
    __slots__ = ("tab_id", "url", "title", "active")
    TAB_ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    tab_id: str
    url: str
    title: str
    active: bool
    def __init__(self, tab_id: _Optional[str] = ..., url: _Optional[str] = ..., title: _Optional[str] = ..., active: _Optional[bool] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("frame_id", "name", "url")
    FRAME_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    frame_id: str
    name: str
    url: str
    def __init__(self, frame_id: _Optional[str] = ..., name: _Optional[str] = ..., url: _Optional[str] = ...) -> None: ...

class Dialog(_message.Message):
    __slots__ = ("type", "message", "dialog_type")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DIALOG_TYPE_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    dialog_type: DialogType
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ..., dialog_type: _Optional[_Union[DialogType, str]] = ...) -> None: ...

class Window(_message.Message):
    __slots__ = ("window_id", "pid", "wm_class", "title", "x", "y", "width", "height")
    WINDOW_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    WM_CLASS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    window_id: int
    pid: int
    wm_class: str
    title: str
    x: int
    y: int
    width: int
    height: int
    def __init__(self, window_id: _Optional[int] = ..., pid: _Optional[int] = ..., wm_class: _Optional[str] = ..., title: _Optional[str] = ..., x: _Optional[int] = ..., y: _Optional[int] = ..., width: _Optional[int] = ..., height: _Optional[int] = ...) -> None: ...

class Box(_message.Message):
    __slots__ = ("x", "y", "width", "height")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    width: int
    height: int
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., width: _Optional[int] = ..., height: _Optional[int] = ...) -> None: ...

class ElementContext(_message.Message):
    __slots__ = ("role", "name", "ref")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    role: str
    name: str
    ref: str
    def __init__(self, role: _Optional[str] = ..., name: _Optional[str] = ..., ref: _Optional[str] = ...) -> None: ...

class Element(_message.Message):
    __slots__ = ("ref", "role", "name", "tab_id", "frame", "text", "url", "placeholder", "disabled", "expanded", "selected", "focused", "checked", "pressed", "level", "invalid", "box", "parent", "row", "list_item", "dialog", "form", "heading")
    REF_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TAB_ID_FIELD_NUMBER: _ClassVar[int]
    FRAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    PLACEHOLDER_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    EXPANDED_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FIELD_NUMBER: _ClassVar[int]
    FOCUSED_FIELD_NUMBER: _ClassVar[int]
    CHECKED_FIELD_NUMBER: _ClassVar[int]
    PRESSED_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    INVALID_FIELD_NUMBER: _ClassVar[int]
    BOX_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    LIST_ITEM_FIELD_NUMBER: _ClassVar[int]
    DIALOG_FIELD_NUMBER: _ClassVar[int]
    FORM_FIELD_NUMBER: _ClassVar[int]
    HEADING_FIELD_NUMBER: _ClassVar[int]
    ref: str
    role: str
    name: str
    tab_id: str
    frame: str
    text: str
    url: str
    placeholder: str
    disabled: bool
    expanded: bool
    selected: bool
    focused: bool
    checked: str
    pressed: str
    level: int
    invalid: str
    box: Box
    parent: str
    row: ElementContext
    list_item: ElementContext
    dialog: ElementContext
    form: ElementContext
    heading: ElementContext
    def __init__(self, ref: _Optional[str] = ..., role: _Optional[str] = ..., name: _Optional[str] = ..., tab_id: _Optional[str] = ..., frame: _Optional[str] = ..., text: _Optional[str] = ..., url: _Optional[str] = ..., placeholder: _Optional[str] = ..., disabled: _Optional[bool] = ..., expanded: _Optional[bool] = ..., selected: _Optional[bool] = ..., focused: _Optional[bool] = ..., checked: _Optional[str] = ..., pressed: _Optional[str] = ..., level: _Optional[int] = ..., invalid: _Optional[str] = ..., box: _Optional[_Union[Box, _Mapping]] = ..., parent: _Optional[str] = ..., row: _Optional[_Union[ElementContext, _Mapping]] = ..., list_item: _Optional[_Union[ElementContext, _Mapping]] = ..., dialog: _Optional[_Union[ElementContext, _Mapping]] = ..., form: _Optional[_Union[ElementContext, _Mapping]] = ..., heading: _Optional[_Union[ElementContext, _Mapping]] = ...) -> None: ...

class DesktopState(_message.Message):
    __slots__ = ("screen_width", "screen_height", "target", "active", "stacking", "screenshot_of_target", "screenshot_x", "screenshot_y")
    SCREEN_WIDTH_FIELD_NUMBER: _ClassVar[int]
    SCREEN_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    STACKING_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_OF_TARGET_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_X_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_Y_FIELD_NUMBER: _ClassVar[int]
    screen_width: int
    screen_height: int
    target: Window
    active: Window
    stacking: _containers.RepeatedCompositeFieldContainer[Window]
    screenshot_of_target: bool
    screenshot_x: int
    screenshot_y: int
    def __init__(self, screen_width: _Optional[int] = ..., screen_height: _Optional[int] = ..., target: _Optional[_Union[Window, _Mapping]] = ..., active: _Optional[_Union[Window, _Mapping]] = ..., stacking: _Optional[_Iterable[_Union[Window, _Mapping]]] = ..., screenshot_of_target: _Optional[bool] = ..., screenshot_x: _Optional[int] = ..., screenshot_y: _Optional[int] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("observation_id", "session_id", "generation", "lease_epoch", "url", "title", "snapshot", "screenshot_png", "digest", "taken_at_ms", "tabs", "active_tab", "frames", "dialogs", "viewport_width", "viewport_height", "mutation_counter", "is_diff", "diff", "screenshot_scale", "desktop", "elements", "elements_gone")
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
    TABS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TAB_FIELD_NUMBER: _ClassVar[int]
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    DIALOGS_FIELD_NUMBER: _ClassVar[int]
    VIEWPORT_WIDTH_FIELD_NUMBER: _ClassVar[int]
    VIEWPORT_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    MUTATION_COUNTER_FIELD_NUMBER: _ClassVar[int]
    IS_DIFF_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_SCALE_FIELD_NUMBER: _ClassVar[int]
    DESKTOP_FIELD_NUMBER: _ClassVar[int]
    ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    ELEMENTS_GONE_FIELD_NUMBER: _ClassVar[int]
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
    tabs: _containers.RepeatedCompositeFieldContainer[Tab]
    active_tab: str
    frames: _containers.RepeatedCompositeFieldContainer[Frame]
    dialogs: _containers.RepeatedCompositeFieldContainer[Dialog]
    viewport_width: int
    viewport_height: int
    mutation_counter: int
    is_diff: bool
    diff: str
    screenshot_scale: float
    desktop: DesktopState
    elements: _containers.RepeatedCompositeFieldContainer[Element]
    elements_gone: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, observation_id: _Optional[str] = ..., session_id: _Optional[str] = ..., generation: _Optional[int] = ..., lease_epoch: _Optional[int] = ..., url: _Optional[str] = ..., title: _Optional[str] = ..., snapshot: _Optional[str] = ..., screenshot_png: _Optional[bytes] = ..., digest: _Optional[str] = ..., taken_at_ms: _Optional[int] = ..., tabs: _Optional[_Iterable[_Union[Tab, _Mapping]]] = ..., active_tab: _Optional[str] = ..., frames: _Optional[_Iterable[_Union[Frame, _Mapping]]] = ..., dialogs: _Optional[_Iterable[_Union[Dialog, _Mapping]]] = ..., viewport_width: _Optional[int] = ..., viewport_height: _Optional[int] = ..., mutation_counter: _Optional[int] = ..., is_diff: _Optional[bool] = ..., diff: _Optional[str] = ..., screenshot_scale: _Optional[float] = ..., desktop: _Optional[_Union[DesktopState, _Mapping]] = ..., elements: _Optional[_Iterable[_Union[Element, _Mapping]]] = ..., elements_gone: _Optional[_Iterable[str]] = ...) -> None: ...

class Expectation(_message.Message):
    __slots__ = ("text_visible", "url_matches", "role", "name", "gone", "field_ref", "field_value", "within_ms")
    TEXT_VISIBLE_FIELD_NUMBER: _ClassVar[int]
    URL_MATCHES_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    FIELD_REF_FIELD_NUMBER: _ClassVar[int]
    FIELD_VALUE_FIELD_NUMBER: _ClassVar[int]
    WITHIN_MS_FIELD_NUMBER: _ClassVar[int]
    text_visible: str
    url_matches: str
    role: str
    name: str
    gone: bool
    field_ref: str
    field_value: str
    within_ms: int
    def __init__(self, text_visible: _Optional[str] = ..., url_matches: _Optional[str] = ..., role: _Optional[str] = ..., name: _Optional[str] = ..., gone: _Optional[bool] = ..., field_ref: _Optional[str] = ..., field_value: _Optional[str] = ..., within_ms: _Optional[int] = ...) -> None: ...

class WaitFor(_message.Message):
    __slots__ = ("text", "role", "name", "url_matches", "window_title", "gone")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_MATCHES_FIELD_NUMBER: _ClassVar[int]
    WINDOW_TITLE_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    text: str
    role: str
    name: str
    url_matches: str
    window_title: str
    gone: bool
    def __init__(self, text: _Optional[str] = ..., role: _Optional[str] = ..., name: _Optional[str] = ..., url_matches: _Optional[str] = ..., window_title: _Optional[str] = ..., gone: _Optional[bool] = ...) -> None: ...

class ActRequest(_message.Message):
    __slots__ = ("session_id", "observation_id", "kind", "ref", "text", "key", "values", "url", "idempotency_key", "expect", "timeout_ms", "x", "y", "to_x", "to_y", "button", "click_count", "delta_x", "delta_y", "key_delay_ms", "files", "tab_id", "wait_for", "keys", "approval_wait_ms", "skip_reobserve", "point_space", "approval_asked", "to_ref")
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
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    TO_X_FIELD_NUMBER: _ClassVar[int]
    TO_Y_FIELD_NUMBER: _ClassVar[int]
    BUTTON_FIELD_NUMBER: _ClassVar[int]
    CLICK_COUNT_FIELD_NUMBER: _ClassVar[int]
    DELTA_X_FIELD_NUMBER: _ClassVar[int]
    DELTA_Y_FIELD_NUMBER: _ClassVar[int]
    KEY_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    TAB_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    SKIP_REOBSERVE_FIELD_NUMBER: _ClassVar[int]
    POINT_SPACE_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ASKED_FIELD_NUMBER: _ClassVar[int]
    TO_REF_FIELD_NUMBER: _ClassVar[int]
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
    x: int
    y: int
    to_x: int
    to_y: int
    button: str
    click_count: int
    delta_x: int
    delta_y: int
    key_delay_ms: int
    files: _containers.RepeatedScalarFieldContainer[str]
    tab_id: str
    wait_for: WaitFor
    keys: _containers.RepeatedScalarFieldContainer[str]
    approval_wait_ms: int
    skip_reobserve: bool
    point_space: PointSpace
    approval_asked: str
    to_ref: str
    def __init__(self, session_id: _Optional[str] = ..., observation_id: _Optional[str] = ..., kind: _Optional[_Union[ActionKind, str]] = ..., ref: _Optional[str] = ..., text: _Optional[str] = ..., key: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ..., url: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., expect: _Optional[_Union[Expectation, _Mapping]] = ..., timeout_ms: _Optional[int] = ..., x: _Optional[int] = ..., y: _Optional[int] = ..., to_x: _Optional[int] = ..., to_y: _Optional[int] = ..., button: _Optional[str] = ..., click_count: _Optional[int] = ..., delta_x: _Optional[int] = ..., delta_y: _Optional[int] = ..., key_delay_ms: _Optional[int] = ..., files: _Optional[_Iterable[str]] = ..., tab_id: _Optional[str] = ..., wait_for: _Optional[_Union[WaitFor, _Mapping]] = ..., keys: _Optional[_Iterable[str]] = ..., approval_wait_ms: _Optional[int] = ..., skip_reobserve: _Optional[bool] = ..., point_space: _Optional[_Union[PointSpace, str]] = ..., approval_asked: _Optional[str] = ..., to_ref: _Optional[str] = ...) -> None: ...

class ActionResult(_message.Message):
    __slots__ = ("action_id", "outcome", "reason", "message", "execution_started", "evidence", "decision_id", "idempotency_key", "typed_chars", "approval_id", "policies")
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_STARTED_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TYPED_CHARS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    action_id: str
    outcome: Outcome
    reason: Reason
    message: str
    execution_started: bool
    evidence: Evidence
    decision_id: str
    idempotency_key: str
    typed_chars: int
    approval_id: str
    policies: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, action_id: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., execution_started: _Optional[bool] = ..., evidence: _Optional[_Union[Evidence, str]] = ..., decision_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., typed_chars: _Optional[int] = ..., approval_id: _Optional[str] = ..., policies: _Optional[_Iterable[str]] = ...) -> None: ...

class ActResponse(_message.Message):
    __slots__ = ("result", "observation")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    result: ActionResult
    observation: Observation
    def __init__(self, result: _Optional[_Union[ActionResult, _Mapping]] = ..., observation: _Optional[_Union[Observation, _Mapping]] = ...) -> None: ...

class ReconcileRequest(_message.Message):
    __slots__ = ("session_id", "action_id", "verdict", "evidence", "observation_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    action_id: str
    verdict: Verdict
    evidence: str
    observation_id: str
    def __init__(self, session_id: _Optional[str] = ..., action_id: _Optional[str] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., evidence: _Optional[str] = ..., observation_id: _Optional[str] = ...) -> None: ...

class ReconcileResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: ActionResult
    def __init__(self, result: _Optional[_Union[ActionResult, _Mapping]] = ...) -> None: ...

class ActBatchRequest(_message.Message):
    __slots__ = ("session_id", "actions")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    actions: _containers.RepeatedCompositeFieldContainer[ActRequest]
    def __init__(self, session_id: _Optional[str] = ..., actions: _Optional[_Iterable[_Union[ActRequest, _Mapping]]] = ...) -> None: ...

class ActBatchResponse(_message.Message):
    __slots__ = ("results", "not_started", "stop_reason", "observation", "stop")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    NOT_STARTED_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ActionResult]
    not_started: _containers.RepeatedScalarFieldContainer[int]
    stop_reason: str
    observation: Observation
    stop: BatchStop
    def __init__(self, results: _Optional[_Iterable[_Union[ActionResult, _Mapping]]] = ..., not_started: _Optional[_Iterable[int]] = ..., stop_reason: _Optional[str] = ..., observation: _Optional[_Union[Observation, _Mapping]] = ..., stop: _Optional[_Union[BatchStop, str]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AttachRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SessionEvent(_message.Message):
    __slots__ = ("kind", "lease_epoch", "human_holds", "message")
    KIND_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HUMAN_HOLDS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    kind: SessionEventKind
    lease_epoch: int
    human_holds: bool
    message: str
    def __init__(self, kind: _Optional[_Union[SessionEventKind, str]] = ..., lease_epoch: _Optional[int] = ..., human_holds: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class PersonRequest(_message.Message):
    __slots__ = ("request_id", "session_id", "target", "agent", "reason", "status", "asked_at_ms", "taken_by", "taken_at_epoch", "ended_at_ms", "lease_epoch")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ASKED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TAKEN_BY_FIELD_NUMBER: _ClassVar[int]
    TAKEN_AT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    session_id: str
    target: str
    agent: str
    reason: str
    status: PersonRequestStatus
    asked_at_ms: int
    taken_by: str
    taken_at_epoch: int
    ended_at_ms: int
    lease_epoch: int
    def __init__(self, request_id: _Optional[str] = ..., session_id: _Optional[str] = ..., target: _Optional[str] = ..., agent: _Optional[str] = ..., reason: _Optional[str] = ..., status: _Optional[_Union[PersonRequestStatus, str]] = ..., asked_at_ms: _Optional[int] = ..., taken_by: _Optional[str] = ..., taken_at_epoch: _Optional[int] = ..., ended_at_ms: _Optional[int] = ..., lease_epoch: _Optional[int] = ...) -> None: ...

class SessionSummary(_message.Message):
    __slots__ = ("session_id", "target", "agent", "backend", "lease_epoch", "human_holds", "url", "title", "latest_observation_id", "last_action_id", "last_action", "last_outcome", "last_action_at_ms", "unknown_actions", "person_request", "live_view", "snapshot")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HUMAN_HOLDS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    LATEST_OBSERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTION_FIELD_NUMBER: _ClassVar[int]
    LAST_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTION_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    PERSON_REQUEST_FIELD_NUMBER: _ClassVar[int]
    LIVE_VIEW_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    target: str
    agent: str
    backend: Backend
    lease_epoch: int
    human_holds: bool
    url: str
    title: str
    latest_observation_id: str
    last_action_id: str
    last_action: str
    last_outcome: str
    last_action_at_ms: int
    unknown_actions: _containers.RepeatedScalarFieldContainer[str]
    person_request: PersonRequest
    live_view: bool
    snapshot: str
    def __init__(self, session_id: _Optional[str] = ..., target: _Optional[str] = ..., agent: _Optional[str] = ..., backend: _Optional[_Union[Backend, str]] = ..., lease_epoch: _Optional[int] = ..., human_holds: _Optional[bool] = ..., url: _Optional[str] = ..., title: _Optional[str] = ..., latest_observation_id: _Optional[str] = ..., last_action_id: _Optional[str] = ..., last_action: _Optional[str] = ..., last_outcome: _Optional[str] = ..., last_action_at_ms: _Optional[int] = ..., unknown_actions: _Optional[_Iterable[str]] = ..., person_request: _Optional[_Union[PersonRequest, _Mapping]] = ..., live_view: _Optional[bool] = ..., snapshot: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionSummary]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionSummary, _Mapping]]] = ...) -> None: ...

class WatchScreenRequest(_message.Message):
    __slots__ = ("session_id", "max_width", "max_height", "quality")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_WIDTH_FIELD_NUMBER: _ClassVar[int]
    MAX_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    max_width: int
    max_height: int
    quality: int
    def __init__(self, session_id: _Optional[str] = ..., max_width: _Optional[int] = ..., max_height: _Optional[int] = ..., quality: _Optional[int] = ...) -> None: ...

class ScreenFrame(_message.Message):
    __slots__ = ("seq", "image", "mime_type", "image_width", "image_height", "surface_width", "surface_height", "offset_top", "page_scale", "scroll_x", "scroll_y", "captured_at_ms", "url", "tab_id")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_WIDTH_FIELD_NUMBER: _ClassVar[int]
    IMAGE_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    SURFACE_WIDTH_FIELD_NUMBER: _ClassVar[int]
    SURFACE_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_TOP_FIELD_NUMBER: _ClassVar[int]
    PAGE_SCALE_FIELD_NUMBER: _ClassVar[int]
    SCROLL_X_FIELD_NUMBER: _ClassVar[int]
    SCROLL_Y_FIELD_NUMBER: _ClassVar[int]
    CAPTURED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TAB_ID_FIELD_NUMBER: _ClassVar[int]
    seq: int
    image: bytes
    mime_type: str
    image_width: int
    image_height: int
    surface_width: float
    surface_height: float
    offset_top: float
    page_scale: float
    scroll_x: float
    scroll_y: float
    captured_at_ms: int
    url: str
    tab_id: str
    def __init__(self, seq: _Optional[int] = ..., image: _Optional[bytes] = ..., mime_type: _Optional[str] = ..., image_width: _Optional[int] = ..., image_height: _Optional[int] = ..., surface_width: _Optional[float] = ..., surface_height: _Optional[float] = ..., offset_top: _Optional[float] = ..., page_scale: _Optional[float] = ..., scroll_x: _Optional[float] = ..., scroll_y: _Optional[float] = ..., captured_at_ms: _Optional[int] = ..., url: _Optional[str] = ..., tab_id: _Optional[str] = ...) -> None: ...

class WatchTimelineRequest(_message.Message):
    __slots__ = ("session_id", "since_seq")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    since_seq: int
    def __init__(self, session_id: _Optional[str] = ..., since_seq: _Optional[int] = ...) -> None: ...

class TimelineEntry(_message.Message):
    __slots__ = ("seq", "at_ms", "kind", "action_id", "principal", "principal_kind", "epoch", "outcome", "reason", "line")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_KIND_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    at_ms: int
    kind: str
    action_id: str
    principal: str
    principal_kind: str
    epoch: int
    outcome: str
    reason: str
    line: str
    def __init__(self, seq: _Optional[int] = ..., at_ms: _Optional[int] = ..., kind: _Optional[str] = ..., action_id: _Optional[str] = ..., principal: _Optional[str] = ..., principal_kind: _Optional[str] = ..., epoch: _Optional[int] = ..., outcome: _Optional[str] = ..., reason: _Optional[str] = ..., line: _Optional[str] = ...) -> None: ...

class HumanInputRequest(_message.Message):
    __slots__ = ("session_id", "lease_epoch", "kind", "x", "y", "text", "key", "delta_x", "delta_y", "button", "input_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    DELTA_X_FIELD_NUMBER: _ClassVar[int]
    DELTA_Y_FIELD_NUMBER: _ClassVar[int]
    BUTTON_FIELD_NUMBER: _ClassVar[int]
    INPUT_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    lease_epoch: int
    kind: ActionKind
    x: float
    y: float
    text: str
    key: str
    delta_x: int
    delta_y: int
    button: str
    input_id: str
    def __init__(self, session_id: _Optional[str] = ..., lease_epoch: _Optional[int] = ..., kind: _Optional[_Union[ActionKind, str]] = ..., x: _Optional[float] = ..., y: _Optional[float] = ..., text: _Optional[str] = ..., key: _Optional[str] = ..., delta_x: _Optional[int] = ..., delta_y: _Optional[int] = ..., button: _Optional[str] = ..., input_id: _Optional[str] = ...) -> None: ...

class HumanInputResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: ActionResult
    def __init__(self, result: _Optional[_Union[ActionResult, _Mapping]] = ...) -> None: ...

class LocateRequest(_message.Message):
    __slots__ = ("session_id", "role", "name")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    role: str
    name: str
    def __init__(self, session_id: _Optional[str] = ..., role: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class LocateResponse(_message.Message):
    __slots__ = ("x", "y", "width", "height")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    x: float
    y: float
    width: float
    height: float
    def __init__(self, x: _Optional[float] = ..., y: _Optional[float] = ..., width: _Optional[float] = ..., height: _Optional[float] = ...) -> None: ...

class DescribeActionRequest(_message.Message):
    __slots__ = ("session_id", "action_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    action_id: str
    def __init__(self, session_id: _Optional[str] = ..., action_id: _Optional[str] = ...) -> None: ...

class DescribeActionResponse(_message.Message):
    __slots__ = ("action_id", "kind", "params_json", "observation_id", "url", "title", "snapshot", "element_context", "screenshot_png")
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_PNG_FIELD_NUMBER: _ClassVar[int]
    action_id: str
    kind: str
    params_json: str
    observation_id: str
    url: str
    title: str
    snapshot: str
    element_context: str
    screenshot_png: bytes
    def __init__(self, action_id: _Optional[str] = ..., kind: _Optional[str] = ..., params_json: _Optional[str] = ..., observation_id: _Optional[str] = ..., url: _Optional[str] = ..., title: _Optional[str] = ..., snapshot: _Optional[str] = ..., element_context: _Optional[str] = ..., screenshot_png: _Optional[bytes] = ...) -> None: ...

class AskForPersonRequest(_message.Message):
    __slots__ = ("session_id", "reason", "wait_ms", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reason: str
    wait_ms: int
    request_id: str
    def __init__(self, session_id: _Optional[str] = ..., reason: _Optional[str] = ..., wait_ms: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class AskForPersonResponse(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: PersonRequest
    def __init__(self, request: _Optional[_Union[PersonRequest, _Mapping]] = ...) -> None: ...
