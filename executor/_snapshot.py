"""What a cited ref means, and snapshot diffs.

A cited ref is resolved from the observation's structured element list (``_elements``),
never by searching the snapshot's text, which a page controls: ``RefInfo`` is what the
guarded loop and the backends are told about the element an action cites.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from handrail.executor._elements import Element

_REF = re.compile(r"^(?:f\d+)?e\d+$")


@dataclass(frozen=True)
class RefInfo:
    """What an observation said a ref was: its role, accessible name and document, and
    the structured element it was taken from (None for a backend without one)."""

    ref: str
    role: str
    name: str
    frame: str  # the document part of the ref (see document_of)
    element: Element | None = None

    @classmethod
    def of(cls, element: Element) -> RefInfo:
        return cls(element.ref, element.role, element.name, document_of(element.ref), element)


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
