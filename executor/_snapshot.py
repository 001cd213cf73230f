"""Refs of an ARIA snapshot taken with ``aria_snapshot(mode="ai")``, and snapshot diffs.

The guarded loop and the SDK both read refs (the loop to name what a ref meant, the SDK
to find one by role and name); the browser backend's own reading of its snapshots is in
``browser._aria``.
"""

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
    frame: str  # the document part of the ref (see document_of)


def document_of(ref: str) -> str:
    """The document part of a ref: "" for ``e12``, "f2" for ``f2e12``.

    Playwright prefixes the refs of every document but the first it snapshots in a page:
    a child frame's, and the main frame's after a navigation. Which one is the main
    frame's the browser backend reads from the latest snapshot (``browser._aria``).
    """
    return ref[: ref.index("e")] if ref.startswith("f") and "e" in ref else ""


def is_ref(text: str) -> bool:
    """Whether ``text`` has the form of a snapshot ref (``e12``, ``f1e3``)."""
    return bool(_REF.match(text))


def find_ref(snapshot: str, ref: str) -> RefInfo | None:
    """The role, name and frame a snapshot gives ``ref``, reading only its own line.

    A substring search instead of parsing the whole snapshot: a page of thousands of
    controls costs microseconds, not milliseconds.
    """
    at = snapshot.find(f"[ref={ref}]")
    if at < 0:
        return None
    start = snapshot.rfind("\n", 0, at) + 1
    end = snapshot.find("\n", at)
    refs = parse_refs(snapshot[start : end if end >= 0 else len(snapshot)])
    return refs.get(ref)


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
        refs[ref] = RefInfo(ref=ref, role=m.group("role"), name=name, frame=document_of(ref))
    return refs


def make_diff(old: str, new: str) -> str:
    """A line diff of two snapshots, as unified-diff hunks with no context lines."""
    import difflib

    a, b = old.splitlines(), new.splitlines()
    parts: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        parts.append(f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@")
        parts.extend("-" + line for line in a[i1:i2])
        parts.extend("+" + line for line in b[j1:j2])
    return "\n".join(parts)


_HUNK = re.compile(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@$")


def apply_diff(old: str, diff: str) -> str:
    """Rebuild the new snapshot from the old one and ``make_diff``'s output.

    Raises:
        ValueError: the diff does not apply to ``old``.
    """
    a = old.splitlines()
    out: list[str] = []
    pos = 0  # next line of a to copy
    lines = diff.splitlines()
    i = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if m is None:
            raise ValueError(f"diff line {i + 1} is not a hunk header: {lines[i]!r}")
        start, count, _, added = (int(g) for g in m.groups())
        i += 1
        out.extend(a[pos : start - 1])
        removed = lines[i : i + count]
        if [r[1:] for r in removed] != a[start - 1 : start - 1 + count]:
            raise ValueError(f"hunk {m.group(0)} does not match the old snapshot")
        i += count
        out.extend(line[1:] for line in lines[i : i + added])
        i += added
        pos = start - 1 + count
    out.extend(a[pos:])
    return "\n".join(out)
