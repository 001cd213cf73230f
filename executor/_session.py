"""Sessions and the control lease each one rides on.

One ``Sessions`` object owns the registry; one ``LeaseFence`` per target remembers the
highest lease epoch the executor has seen, so that a decision made just before a
takeover cannot be dispatched after it, and which agent holds the lease. Each session
sees the fence through its agent's ``FenceView``: sessions of different agents on one
target never share a hold (one agent's refusal never drops another's lease).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from handrail.executor._backend import Backend
from handrail.executor._elements import Element
from handrail.executor._errors import NotFoundError, SessionClosedError
from handrail.executor._models import Observation
from handrail.executor._snapshot import RefInfo

_REMEMBERED = 8


@dataclass
class LeaseFence:
    """What the executor knows of one target's control lease."""

    target: str
    highest_epoch: int = 0
    held_epoch: int | None = None  # the epoch an agent of ours holds, None when none does
    human_holds: bool = False  # the newest lease seen is a person's
    holder: str = ""  # the agent that holds held_epoch

    def saw(self, epoch: int) -> None:
        """Record an epoch seen in any answer from the sidecar; epochs never go back."""
        if epoch > self.highest_epoch:
            self.highest_epoch = epoch
        if self.held_epoch is not None and epoch > self.held_epoch:
            self.held_epoch = None  # someone else changed the holder since

    def saw_lease(self, epoch: int, holder_kind: str) -> None:
        """Record a lease the sidecar showed: its epoch, and whether a person holds it
        (unless a newer epoch has been seen already)."""
        self.saw(epoch)
        if epoch >= self.highest_epoch:
            self.human_holds = holder_kind == "human"

    def hold(self, epoch: int, agent: str = "") -> None:
        self.saw(epoch)
        self.held_epoch = epoch
        self.holder = agent

    def lose(self) -> None:
        self.held_epoch = None
        self.holder = ""

    @property
    def epoch(self) -> int:
        """The epoch an observation is taken under: the held one, else the newest seen."""
        return self.held_epoch if self.held_epoch is not None else self.highest_epoch

    def view(self, agent: str) -> FenceView:
        """The fence as ``agent``'s sessions see it."""
        return FenceView(self, agent)


class FenceView:
    """One agent's view of a target's ``LeaseFence``: it holds only what that agent holds,
    and loses only that; the highest epoch seen and a person's hold are the target's."""

    def __init__(self, fence: LeaseFence, agent: str) -> None:
        self._fence = fence
        self.agent = agent
        self.target = fence.target

    @property
    def highest_epoch(self) -> int:
        return self._fence.highest_epoch

    @property
    def human_holds(self) -> bool:
        return self._fence.human_holds

    @human_holds.setter
    def human_holds(self, value: bool) -> None:
        self._fence.human_holds = value

    @property
    def held_epoch(self) -> int | None:
        """The epoch this agent holds, None when it holds none."""
        return self._fence.held_epoch if self._fence.holder == self.agent else None

    @property
    def epoch(self) -> int:
        """The epoch an observation is taken under: the held one, else the newest seen."""
        held = self.held_epoch
        return held if held is not None else self._fence.highest_epoch

    def saw(self, epoch: int) -> None:
        self._fence.saw(epoch)

    def saw_lease(self, epoch: int, holder_kind: str) -> None:
        self._fence.saw_lease(epoch, holder_kind)

    def hold(self, epoch: int) -> None:
        self._fence.hold(epoch, self.agent)

    def lose(self) -> None:
        """This agent no longer holds the lease (another agent's hold is left alone)."""
        if self._fence.holder == self.agent:
            self._fence.lose()


@dataclass
class Session:
    session_id: str
    target: str
    agent: str
    token_hash: bytes
    backend: Backend
    fence: FenceView
    generation: int = 0
    latest: Observation | None = None
    # The element lists of the last few observations, by generation: what a (possibly
    # stale) observation's ref meant. The only place a cited ref is resolved from.
    recent_elements: dict[int, tuple[Element, ...]] = field(default_factory=dict)
    latest_full_snapshot: str | None = None  # for diff observations
    latest_elements: tuple[Element, ...] = ()  # for diff observations
    closed: bool = False
    # One write at a time per session; observing does not take it.
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    renewer: asyncio.Task[None] | None = None
    # The parameters of the last few actions sent to the sidecar, by action id, so that an
    # operator deciding an approval sees the exact action (the console's DescribeAction).
    asked: dict[str, dict[str, Any]] = field(default_factory=dict)

    def note_action(self, action_id: str, params: dict[str, Any]) -> None:
        self.asked[action_id] = params
        while len(self.asked) > 4 * _REMEMBERED:
            del self.asked[next(iter(self.asked))]

    # How long the session lives without a call (ms), and when the last call came
    # (monotonic seconds); an open Attach stream keeps it alive.
    ttl_ms: int = 600_000
    last_call: float = field(default_factory=time.monotonic)
    attached: int = 0
    events: list[asyncio.Queue[object]] = field(default_factory=list)

    def touch(self) -> None:
        """A call named this session: its TTL starts again."""
        self.last_call = time.monotonic()

    def idle_for(self, now: float) -> float:
        """Seconds since the last call (0 while an Attach stream is open)."""
        return 0.0 if self.attached else now - self.last_call

    def tell(self, event: object) -> None:
        """Push news to every Attach stream of the session."""
        for queue in self.events:
            queue.put_nowait(event)

    _indexes: dict[int, dict[str, Element]] = field(default_factory=dict)
    _scanned: set[int] = field(default_factory=set)

    def remember(self, generation: int, elements: tuple[Element, ...]) -> None:
        self.recent_elements[generation] = elements
        for old in [g for g in self.recent_elements if g <= generation - _REMEMBERED]:
            del self.recent_elements[old]
            self._indexes.pop(old, None)
            self._scanned.discard(old)

    def ref_info(self, generation: int, ref: str) -> RefInfo | None:
        """What observation ``generation``'s element list says ``ref`` is (None: no such ref).

        Only the structured list is read: a ref that appears in the snapshot's text but is
        no node's is not a ref.
        """
        index = self._indexes.get(generation)
        if index is None:
            elements = self.recent_elements.get(generation)
            if elements is None:
                return None
            # An unchanged page gives the very list of the observation before (the
            # reader's), whose index serves as it is.
            same = (self._indexes.get(g) for g, e in self.recent_elements.items() if e is elements)
            index = next((i for i in same if i is not None), None)
            if index is None and generation not in self._scanned:
                # The first ref cited from a list (most often the only one): a scan that
                # stops at it costs less than indexing thousands of elements.
                self._scanned.add(generation)
                found = next((e for e in elements if e.ref == ref), None)
                return None if found is None else RefInfo.of(found)
            index = self._indexes[generation] = index or {e.ref: e for e in elements}
        element = index.get(ref)
        return None if element is None else RefInfo.of(element)


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Sessions:
    """The registry of open sessions and of lease fences per target."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._fences: dict[str, LeaseFence] = {}

    @staticmethod
    def new_id() -> str:
        return "s_" + secrets.token_hex(6)

    def fence(self, target: str) -> LeaseFence:
        fence = self._fences.get(target)
        if fence is None:
            fence = self._fences[target] = LeaseFence(target)
        return fence

    def add(self, session: Session) -> None:
        self._sessions[session.session_id] = session

    def get(self, session_id: str, token: str) -> Session:
        """The open session ``session_id``, if ``token`` is the one that opened it.

        Another principal's session reads exactly as an unknown one (no existence oracle).
        """
        session = self._sessions.get(session_id)
        if session is None or not hmac.compare_digest(session.token_hash, token_digest(token)):
            raise NotFoundError("session_id", f"no session {session_id!r}")
        if session.closed:
            raise SessionClosedError(f"session {session_id} is closed")
        session.touch()
        return session

    def find(self, session_id: str) -> Session:
        """The open session ``session_id``, for an operator (whose role was checked)."""
        session = self._sessions.get(session_id)
        if session is None or session.closed:
            raise NotFoundError("session_id", f"no open session {session_id!r}")
        return session

    def remove(self, session_id: str) -> Session | None:
        return self._sessions.pop(session_id, None)

    def all(self) -> list[Session]:
        return list(self._sessions.values())
