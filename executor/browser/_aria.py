"""What the browser backend reads from its own ARIA snapshots: the main frame's refs, the viewport."""

from __future__ import annotations

import re
from collections.abc import Sequence

from handrail.executor._elements import Element
from handrail.executor._snapshot import document_of


def main_document(elements: Sequence[Element]) -> str | None:
    """The document part of the main frame's refs: that of the first element's ref.

    The first node of a snapshot with a ref is the main frame's (a child frame's nodes sit
    under its ``iframe`` node). None: the snapshot has no ref.
    """
    return document_of(elements[0].ref) if elements else None


_BOX = re.compile(r" \[box=(-?\d+),(-?\d+),(\d+),(\d+)\]")


def viewport_filter(snapshot: str, width: int, height: int) -> str:
    """Keep the nodes of a ``boxes=True`` snapshot that intersect the viewport.

    A node outside the viewport is dropped with its subtree; the box annotations of the
    nodes kept stay (``strip_boxes`` takes them out of the text an agent reads). Nodes
    without a box (text) follow their parent.
    """
    out: list[str] = []
    drop_below: int | None = None  # indentation under which lines are dropped
    for line in snapshot.splitlines():
        indent = len(line) - len(line.lstrip())
        if drop_below is not None and indent > drop_below:
            continue
        drop_below = None
        m = _BOX.search(line)
        if m:
            x, y, w, h = (int(g) for g in m.groups())
            # A zero box (an <option> in a closed select) follows its parent.
            if (w or h) and (x + w <= 0 or y + h <= 0 or x >= width or y >= height):
                drop_below = indent
                continue
        out.append(line)
    return "\n".join(out)


def strip_boxes(snapshot: str) -> str:
    """The snapshot without its ``[box=...]`` annotations."""
    return _BOX.sub("", snapshot)
