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
    __slots__ = ("session_id", "observation_id", "kind", "ref", "text", "key", "values", "url", "idempotency_key", "expect", "timeout_ms", "x", "y", "to_x", "to_y", "button", "click_count", "delta_x", "delta_y", "key_delay_ms", "files", "tab_id", "wait_for", "keys", "approval_wait_ms", "skip_reobserve")
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
    def __init__(self, session_id: _Optional[str] = ..., observation_id: _Optional[str] = ..., kind: _Optional[_Union[ActionKind, str]] = ..., ref: _Optional[str] = ..., text: _Optional[str] = ..., key: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ..., url: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., expect: _Optional[_Union[Expectation, _Mapping]] = ..., timeout_ms: _Optional[int] = ..., x: _Optional[int] = ..., y: _Optional[int] = ..., to_x: _Optional[int] = ..., to_y: _Optional[int] = ..., button: _Optional[str] = ..., click_count: _Optional[int] = ..., delta_x: _Optional[int] = ..., delta_y: _Optional[int] = ..., key_delay_ms: _Optional[int] = ..., files: _Optional[_Iterable[str]] = ..., tab_id: _Optional[str] = ..., wait_for: _Optional[_Union[WaitFor, _Mapping]] = ..., keys: _Optional[_Iterable[str]] = ..., approval_wait_ms: _Optional[int] = ..., skip_reobserve: _Optional[bool] = ...) -> None: ...

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
