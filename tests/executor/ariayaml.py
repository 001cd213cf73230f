"""Playwright's ai-mode snapshot renderer, ported line for line for tests.

``render`` turns a tree of ``Node``s into the YAML ``page.aria_snapshot(mode="ai")``
returns (``ariaSnapshotRenderer.ts`` and ``yaml.ts`` of Playwright 1.65), so that a test
can generate trees with any text in them — text built to look like nodes and refs — and
check that the parser reads back exactly the tree that was rendered.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field


@dataclass
class Node:
    role: str
    name: str = ""
    ref: str = ""
    checked: str = ""  # "", "true", "mixed"
    disabled: bool = False
    level: int = 0
    url: str | None = None
    text: str | None = None  # a single text child
    children: list[Node | str] = field(default_factory=list)


def _needs_quotes(s: str) -> bool:
    if not s:
        return True
    if re.search(r"^\s|\s$", s):
        return True
    if re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", s):
        return True
    if s.startswith("-"):
        return True
    if re.search(r"[\n:](\s|$)", s):
        return True
    if re.search(r"\s#", s):
        return True
    if re.search(r"[\n\r]", s):
        return True
    if re.search(r"^[&*\],?!>|@\"'#%]", s):
        return True
    if re.search(r"[{}`]", s):
        return True
    if s.startswith("["):
        return True
    if _js_number(s) or s.lower() in ("y", "n", "yes", "no", "true", "false", "on", "off", "null", "~"):
        return True
    return bool(re.fullmatch(r"[-+]?\.(inf|nan)", s, re.I))


def _js_number(s: str) -> bool:
    """Whether JavaScript's ``!isNaN(Number(s))`` holds."""
    t = s.strip(" \t\n\r\x0b\x0c\u00a0\ufeff\u2028\u2029")
    if t == "":
        return True
    if re.fullmatch(r"0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+", t):
        return True
    return bool(re.fullmatch(r"[+-]?(Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)", t))


def _escape_key(s: str) -> str:
    return "'" + s.replace("'", "''") + "'" if _needs_quotes(s) else s


def _escape_value(s: str) -> str:
    if not _needs_quotes(s):
        return s

    def one(m: re.Match[str]) -> str:
        c = m.group(0)
        table = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
        return table.get(c, f"\\x{ord(c):02x}")

    return '"' + re.sub(r'[\\"\x00-\x1f\x7f-\x9f]', one, s) + '"'


def _key(node: Node) -> str:
    key = node.role
    if node.name and len(node.name) <= 900:
        key += " " + json.dumps(node.name, ensure_ascii=False)
    if node.checked == "mixed":
        key += " [checked=mixed]"
    elif node.checked == "true":
        key += " [checked]"
    if node.disabled:
        key += " [disabled]"
    if node.level:
        key += f" [level={node.level}]"
    if node.ref:
        key += f" [ref={node.ref}]"
    return key


def render(nodes: list[Node | str]) -> str:
    lines: list[str] = []

    def text(value: str, depth: int) -> None:
        escaped = _escape_value(value)
        if escaped:
            lines.append("  " * depth + "- text: " + escaped)

    def visit(node: Node, depth: int) -> None:
        key = "  " * depth + "- " + _escape_key(_key(node))
        if node.text is None and node.url is None and not node.children:
            lines.append(key)
        elif node.text is not None and node.url is None:
            lines.append(key + ": " + _escape_value(node.text))
        else:
            lines.append(key + ":")
            if node.url is not None:
                lines.append("  " * (depth + 1) + "- /url: " + _escape_value(node.url))
            if node.text is not None:
                text(node.text, depth + 1)
            for child in node.children:
                if isinstance(child, str):
                    text(child, depth + 1)
                else:
                    visit(child, depth + 1)

    for node in nodes:
        if isinstance(node, str):
            text(node, 0)
        else:
            visit(node, 0)
    return "\n".join(lines)


def refs(nodes: list[Node | str]) -> list[tuple[str, str, str]]:
    """(ref, role, name) of every node with a ref, in document order, as rendered."""
    out: list[tuple[str, str, str]] = []

    def visit(node: Node | str) -> None:
        if isinstance(node, str):
            return
        if node.ref:
            out.append((node.ref, node.role, node.name if len(node.name) <= 900 else ""))
        for child in node.children:
            visit(child)

    for node in nodes:
        visit(node)
    return out
