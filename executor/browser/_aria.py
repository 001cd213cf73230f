"""What the browser backend reads from its own ARIA snapshots: the main frame's refs, the viewport."""

from __future__ import annotations

import re

from handrail.executor._snapshot import document_of

_FIRST_REF = re.compile(r"\[ref=([a-z0-9]+)\]")


def main_document(snapshot: str) -> str | None:
    """The document part of the main frame's refs: that of the snapshot's first ref.

    Were a page to start with a child frame's refs, the browser backend would take its
    main-frame refs for a child frame's: slower checks and Playwright's click, never less
    safe. None: the snapshot has no ref.
    """
    first = _FIRST_REF.search(snapshot)
    return None if first is None else document_of(first.group(1))


_BOX = re.compile(r" \[box=(-?\d+),(-?\d+),(\d+),(\d+)\]")


def viewport_filter(snapshot: str, width: int, height: int) -> str:
    """Keep the nodes of a ``boxes=True`` snapshot that intersect the viewport.

    A node outside the viewport is dropped with its subtree; box annotations are removed.
    Nodes without a box (text) follow their parent.
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
            line = _BOX.sub("", line)
        out.append(line)
    return "\n".join(out)
