"""Observations: what a backend saw, given the id, generation and lease epoch actions cite.

An observation's id names its session and generation (``s_1a2b:7``); it is taken under
the epoch in force, and it is the only observation an action may cite until the next one
is taken. The element lists of the last few are remembered: a cited ref is resolved from
them (and only from them), and a (possibly stale) ref is still named by the role and name
it had, for idempotency fingerprints.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace

from handrail._rpc import wire_text
from handrail.executor._backend import ObserveOptions, RawObservation
from handrail.executor._elements import Element
from handrail.executor._lease import LeaseKeeper
from handrail.executor._models import Observation
from handrail.executor._session import Session
from handrail.executor._snapshot import make_diff

FULL = ObserveOptions()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _digest(raw: RawObservation) -> str:
    h = hashlib.sha256()
    parts = (raw.url, raw.title, raw.snapshot, raw.active_tab, repr(raw.dialogs), repr(raw.desktop))
    for part in parts:
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()


def _as_text(raw: RawObservation) -> RawObservation:
    """``raw`` with the text its page controls (the title, the tabs' titles and URLs, the
    frames' names and URLs, the dialogs' messages) as :func:`~handrail._rpc.wire_text`: a
    page's script can put a lone surrogate in its title, which made the observation
    unsendable (INTERNAL). The snapshot's names and texts are read so by its parser."""
    tabs = tuple(replace(t, url=wire_text(t.url), title=wire_text(t.title)) for t in raw.tabs)
    frames = tuple(replace(f, name=wire_text(f.name), url=wire_text(f.url)) for f in raw.frames)
    dialogs = tuple(replace(d, message=wire_text(d.message)) for d in raw.dialogs)
    title, url = wire_text(raw.title), wire_text(raw.url)
    if (title, url, tabs, frames, dialogs) == (raw.title, raw.url, raw.tabs, raw.frames, raw.dialogs):
        return raw
    return replace(raw, title=title, url=url, tabs=tabs, frames=frames, dialogs=dialogs)


class Observer:
    """Takes a session's observations.

    Args:
        leases: asked for the target's lease first when the session's agent holds none
            (after a hand-back the agent may take it again).
    """

    def __init__(self, leases: LeaseKeeper) -> None:
        self._leases = leases

    async def observe(self, session: Session, options: ObserveOptions = FULL, *, diff: bool = False) -> Observation:
        """A fresh observation of the session's surface; with ``diff``, as a diff of the last."""
        if session.fence.held_epoch is None:
            await self._leases.acquire(session)
        raw = _as_text(await session.backend.observe(options))
        previous = session.latest_full_snapshot
        previous_elements = session.latest_elements
        session.generation += 1
        obs = Observation(
            observation_id=f"{session.session_id}:{session.generation}",
            session_id=session.session_id,
            generation=session.generation,
            lease_epoch=session.fence.epoch,
            url=raw.url,
            title=raw.title,
            snapshot=raw.snapshot,
            digest=_digest(raw),
            taken_at_ms=_now_ms(),
            screenshot_png=raw.screenshot_png,
            screenshot_scale=raw.screenshot_scale,
            tabs=raw.tabs,
            active_tab=raw.active_tab,
            frames=raw.frames,
            dialogs=raw.dialogs,
            viewport_width=raw.viewport_width,
            viewport_height=raw.viewport_height,
            mutation_counter=raw.mutation_counter,
            desktop=raw.desktop,
            elements=raw.elements,
        )
        session.latest = obs
        session.latest_full_snapshot = raw.snapshot
        session.latest_elements = raw.elements
        session.remember(session.generation, raw.elements)
        if diff and previous is not None:
            changed, gone = element_diff(previous_elements, raw.elements)
            return replace(
                obs,
                snapshot="",
                is_diff=True,
                diff=make_diff(previous, raw.snapshot),
                elements=changed,
                elements_gone=gone,
            )
        return obs


def element_diff(old: tuple[Element, ...], new: tuple[Element, ...]) -> tuple[tuple[Element, ...], tuple[str, ...]]:
    """The elements of ``new`` that ``old`` did not have as they are, and the refs gone."""
    if old is new:
        return (), ()
    before = {e.ref: e for e in old}
    changed = tuple(e for e in new if before.get(e.ref) != e)
    now = {e.ref for e in new}
    return changed, tuple(ref for ref in before if ref not in now)
