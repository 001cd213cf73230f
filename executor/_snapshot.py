"""Reading refs out of an ARIA snapshot taken with ``aria_snapshot(mode="ai")``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# "- button "Turn off auto-renew" [ref=e5]" ; names are JSON-quoted strings.
_LINE = re.compile(
    r"^\s*- (?P<role>[a-zA-Z]+)"
    r'(?: (?P<name>"(?:[^"\\]|\\.)*"))?'
    r"(?P<rest>.*?)\[ref=(?P<ref>[a-z0-9]+)\]"
)
_REF = re.compile(r"^(?:f\d+)?e\d+$")


@dataclass(frozen=True)
class RefInfo:
    """What an observation said a ref was: its role, accessible name and frame."""

    ref: str
    role: str
    name: str
    frame: str  # "" for the main frame, "f1" ... for child frames


def is_ref(text: str) -> bool:
    """Whether ``text`` has the form of a snapshot ref (``e12``, ``f1e3``)."""
    return bool(_REF.match(text))


def parse_refs(snapshot: str) -> dict[str, RefInfo]:
    """Map every ref of a snapshot to its role, name and frame."""
    refs: dict[str, RefInfo] = {}
    for line in snapshot.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        raw_name = m.group("name")
        name = json.loads(raw_name) if raw_name else ""
        ref = m.group("ref")
        frame = ref[: ref.index("e")] if ref.startswith("f") else ""
        refs[ref] = RefInfo(ref=ref, role=m.group("role"), name=name, frame=frame)
    return refs
