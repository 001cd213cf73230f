"""Playwright's ai-mode ARIA snapshot, parsed as the YAML it is into the structured element list.

``page.aria_snapshot(mode="ai")`` renders the ARIA tree as YAML (Playwright's
``ariaSnapshotRenderer.ts``): one block sequence per level, two spaces of indentation per
level, each item one of

- ``KEY`` — a node without children;
- ``KEY: VALUE`` — a node whose only child is text (VALUE is that text);
- ``KEY:`` — a node whose children (and properties) follow one level deeper;

where KEY is ``role "name" [attr] [attr=value] ... [ref=e5]`` (the name a JSON string),
single-quoted by YAML's rules when it needs quoting, and VALUE a plain or a double-quoted
YAML scalar. Text nodes are ``- text: VALUE``; properties ``- /url: VALUE`` and
``- /placeholder: VALUE``.

``parse_snapshot`` parses exactly that YAML: block sequences by indentation, mapping keys
and values with YAML's plain, single- and double-quoted scalar rules, then each key
whole against the node grammar above. Page text only ever reaches a VALUE (or a JSON
name), so no text, however it is written, can pose as a node or a ref. A line outside the
subset Playwright emits raises ``SnapshotFormatError`` inside, and that snapshot is
parsed with PyYAML (libyaml, every scalar a string) instead: several times slower, never
different — a property test renders random trees full of text built to pose as nodes with
a port of Playwright's renderer and checks that both parses read back the tree rendered.
(Where Playwright's output is not strict YAML — a name holding U+2028 or DEL, which
JSON.stringify leaves as they are — this parser reads what Playwright meant, one key.)

Refs in a child frame's part of the tree carry their document's prefix (``f2e7``); the
element's ``frame`` is the ref of the ``iframe`` node it sits under.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any

from handrail._rpc import wire_text
from handrail.executor._elements import Box, Context, Element

__all__ = ["KeyCache", "SnapshotFormatError", "parse_snapshot"]

log = logging.getLogger(__name__)

_NAME_LIMIT = 200  # characters of a container's content kept as its name
_TEXT_LIMIT = 200  # characters of a node's own text kept in its element

_ITEM = re.compile(r"( *)- ")
_SINGLE = re.compile(r"'((?:[^']|'')*)'")
_DOUBLE = re.compile(r'"((?:[^"\\]|\\.)*)"\Z', re.S)
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.S)
_SIMPLE_ESCAPES = {"\\": "\\", '"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "0": "\0", "/": "/"}
_KEY = re.compile(r'([a-z][a-z0-9-]*)(?: ("(?:[^"\\]|\\.)*"))?((?: \[[a-z-]+(?:=[^\]\[]*)?\])*)\Z')
_ATTR = re.compile(r"\[([a-z-]+)(?:=([^\]\[]*))?\]")

# Containers after which a heading stops applying: a heading inside one names what
# follows it there, not what follows the container.
_SECTIONS = frozenset(
    {
        "dialog",
        "alertdialog",
        "form",
        "region",
        "article",
        "listitem",
        "treeitem",
        "row",
        "main",
        "navigation",
        "complementary",
        "banner",
        "contentinfo",
        "search",
        "document",
        "iframe",
        "group",
    }
)


class SnapshotFormatError(ValueError):
    """A snapshot line outside the YAML subset Playwright emits (it is parsed with PyYAML)."""


def _unescape(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code[0] in "xuU" and len(code) > 1:
            point = int(code[1:], 16)
            return chr(point) if point <= 0x10FFFF else "\ufffd"
        if code in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[code]
        raise SnapshotFormatError(f"unknown escape \\{code}")

    return _text(_ESCAPE.sub(one, body)) if "\\" in body else body


def _scalar(text: str) -> str:
    """A YAML scalar as Playwright writes one (plain, single- or double-quoted)."""
    if not text:
        return ""
    first = text[0]
    if first == '"':
        m = _DOUBLE.match(text)
        if m is None:
            raise SnapshotFormatError(f"unterminated double-quoted scalar: {text[:60]!r}")
        return _unescape(m.group(1))
    if first == "'":
        m = _SINGLE.match(text)
        if m is None or m.end() != len(text):
            raise SnapshotFormatError(f"bad single-quoted scalar: {text[:60]!r}")
        return m.group(1).replace("''", "'")
    if first in "&*!|>%@`{[#," or text.endswith(":") or ": " in text or " #" in text:
        raise SnapshotFormatError(f"a plain scalar YAML would read otherwise: {text[:60]!r}")
    return text


# One item of the tree, as the fallback parser yields it: (depth, key, value, has_children).
# ``value`` is None when the key has no inline scalar.
_Item = tuple[int, str, "str | None", bool]


def _line_items(snapshot: str) -> Iterator[_Item]:
    """The items of a snapshot, parsed line by line with YAML's rules for the subset."""
    depth = -1
    for number, line in enumerate(snapshot.split("\n"), 1):
        if not line:
            continue
        item = _line(line, number, depth)
        depth = item[0]
        yield item


def _line(line: str, number: int, depth: int) -> _Item:
    """One line: ``INDENT- KEY``, ``INDENT- KEY:`` or ``INDENT- KEY: VALUE``."""
    m = _ITEM.match(line)
    if m is None:
        raise SnapshotFormatError(f"line {number} is not a sequence item: {line[:60]!r}")
    indent = m.end() - 2
    if indent % 2 or indent // 2 > depth + 1:
        raise SnapshotFormatError(f"line {number}: unexpected indentation {indent}")
    rest = line[m.end() :]
    if rest[:1] == "'":
        km = _SINGLE.match(rest)
        if km is None:
            raise SnapshotFormatError(f"line {number}: unterminated single-quoted key")
        key, tail = km.group(1).replace("''", "'"), rest[km.end() :]
    else:
        colon = rest.find(": ")
        if colon >= 0:
            key, tail = rest[:colon], rest[colon:]
        elif rest[-1:] == ":":
            key, tail = rest[:-1], ":"
        else:
            key, tail = rest, ""
        if not key or key[0] in _PLAIN_FIRST or " #" in key:
            raise SnapshotFormatError(f"line {number}: a key YAML would read otherwise")
    if not tail:
        return indent // 2, key, None, False
    if tail == ":":
        return indent // 2, key, None, True
    if tail[:2] == ": ":
        return indent // 2, key, _scalar(tail[2:]), False
    raise SnapshotFormatError(f"line {number}: unexpected {tail[:30]!r} after the key")


_PLAIN_FIRST = frozenset("'\"&*!|>%@`{[#,")


def _text(value: object) -> str:
    """A decoded scalar as text (:func:`~handrail._rpc.wire_text`): a page can put a NUL or
    a lone surrogate in a name or a text from script, and Chromium's snapshot carries both
    (escaped). Read as they are, they would make the element unactionable (the sidecar
    refuses a NUL) and the observation unsendable (no UTF-8 encoder takes a surrogate)."""
    return wire_text(str(value))


def _yaml_items(snapshot: str) -> Iterator[_Item]:
    """The same items, from PyYAML's parse of the whole snapshot (the fallback)."""
    import yaml

    # The base loader: every scalar is the string written (YAML 1.1's implicit types —
    # "yes", "=", "12" — are not what the snapshot means).
    loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
    tree = yaml.load(snapshot, Loader=loader) or []

    def walk(items: Any, depth: int) -> Iterator[_Item]:
        if not isinstance(items, list):
            raise SnapshotFormatError("a level of the tree is not a sequence")
        for item in items:
            if isinstance(item, dict):
                for key, value in item.items():
                    if isinstance(value, list):
                        yield depth, _text(key), None, True
                        yield from walk(value, depth + 1)
                    else:
                        yield depth, _text(key), "" if value is None else _text(value), False
            else:
                yield depth, _text(item), None, False

    yield from walk(tree, 0)


class _Frame:
    """A node with children being read: what its descendants inherit and tell it."""

    __slots__ = ("anchor", "collect", "context", "ctx", "depth", "element", "heading", "name", "parts", "ref", "role")

    def __init__(self, depth: int, role: str, name: str, ref: str, anchor: str) -> None:
        self.depth, self.role, self.name, self.ref = depth, role, name, ref
        self.anchor = ref or anchor  # its own ref, else its nearest ancestor's
        self.heading: Context | None = None
        self.ctx: tuple[_Frame | None, ...] = (None, None, None, None, None)  # row, list_item, dialog, form, iframe
        self.collect: tuple[_Frame, ...] = ()  # the containers whose content it adds to
        self.parts: list[str] = []
        self.element: list[Any] | None = None
        self.context: Context | None = None

    def as_context(self) -> Context:
        if self.context is None:
            name = self.name or " ".join(" ".join(self.parts).split())[:_NAME_LIMIT]
            self.context = Context(self.role, name, self.ref)
        return self.context


_KIND_SLOT = {"row": 0, "listitem": 1, "treeitem": 1, "article": 1, "dialog": 2, "alertdialog": 2, "form": 3,
              "iframe": 4}  # fmt: skip
_Key = tuple[str, str, str, dict[str, str]]  # role, name, ref, attrs


class KeyCache:
    """Parsed node keys, kept from one snapshot of a page to the next (bounded)."""

    def __init__(self, limit: int = 50_000) -> None:
        self.keys: dict[str, _Key | None] = {}
        self.limit = limit

    def parse(self, key: str) -> _Key | None:
        parsed = self.keys.get(key, False)
        if parsed is False:
            if len(self.keys) >= self.limit:
                self.keys.clear()
            m = _KEY.match(key)
            if m is None:
                parsed = None
                log.warning("snapshot node %r does not fit the node grammar: it gets no ref", key[:80])
            else:
                role, raw_name, attrs = m.groups()
                found = dict(_ATTR.findall(attrs)) if attrs else {}
                parsed = (role, _text(json.loads(raw_name)) if raw_name else "", found.get("ref", ""), found)
            self.keys[key] = parsed
        return parsed  # type: ignore[return-value]


def _add(collect: tuple[_Frame, ...], text: str) -> None:
    for c in collect:
        if len(c.parts) < 64:
            c.parts.append(text)


def _build(
    lines: Iterator[_Item], tab: str, boxes: Mapping[str, tuple[int, int, int, int]], keys: KeyCache
) -> tuple[Element, ...]:
    root = _Frame(-1, "", "", "", "")
    stack = [root]
    top = root
    pending: list[list[Any]] = []
    for depth, key, value, children in lines:
        while top.depth >= depth:
            stack.pop()
            top = stack[-1]
        if key == "text":
            if value and top.collect:
                _add(top.collect, value)
            continue
        if key[:1] == "/":
            if top.element is not None and value is not None:
                if key == "/url":
                    top.element[4] = value
                elif key == "/placeholder":
                    top.element[5] = value
            continue
        parsed = keys.parse(key)
        role, name, ref, attrs = parsed if parsed is not None else ("generic", "", "", {})
        collect = top.collect
        if collect:
            if name:
                _add(collect, name)
            if value:
                _add(collect, value)
        element = None
        if ref:
            element = [ref, role, name, (value or "")[:_TEXT_LIMIT], "", "", attrs, top.ctx, top.heading, top.anchor]
            pending.append(element)
        if role == "heading":
            # Names what follows it, up to the end of its section.
            context = Context(role, name, ref)
            for up in reversed(stack):
                up.heading = context
                if up.role in _SECTIONS:
                    break
        if children:
            frame = _Frame(depth, role, name, ref, top.anchor)
            frame.heading, frame.ctx, frame.collect, frame.element = top.heading, top.ctx, collect, element
            slot = _KIND_SLOT.get(role)
            if slot is not None:
                ctx = list(frame.ctx)
                ctx[slot] = frame
                frame.ctx = tuple(ctx)
                if slot < 4:
                    frame.collect = (*collect, frame)
            stack.append(frame)
            top = frame
    out = []
    make = Element._make
    for ref, role, name, own, url, placeholder, attrs, ctx, heading, parent in pending:
        box = boxes.get(ref)
        row, item, dialog, form, iframe = ctx
        if attrs.keys() <= {"ref", "cursor"}:
            states: tuple[Any, ...] = (False, False, False, False, "", "", 0, "")
        else:
            level = attrs.get("level", "")
            states = (
                "disabled" in attrs,
                "expanded" in attrs,
                "selected" in attrs,
                "active" in attrs,
                _tri(attrs, "checked"),
                _tri(attrs, "pressed"),
                int(level) if level.isdigit() else 0,
                _tri(attrs, "invalid"),
            )
        out.append(
            make(
                (
                    ref,
                    role,
                    name,
                    tab,
                    iframe.ref if iframe is not None else "",
                    own,
                    url,
                    placeholder,
                    *states,
                    Box._make(box) if box is not None else _box(attrs.get("box")),
                    parent,
                    row.as_context() if row is not None else None,
                    item.as_context() if item is not None else None,
                    dialog.as_context() if dialog is not None else None,
                    form.as_context() if form is not None else None,
                    heading,
                )
            )
        )
    return tuple(out)


def _tri(attrs: Mapping[str, str], key: str) -> str:
    if key not in attrs:
        return ""
    return attrs[key] or "true"


def _box(text: str | None) -> Box | None:
    if not text:
        return None
    try:
        x, y, w, h = (int(v) for v in text.split(","))
    except ValueError:
        return None
    return Box(x, y, w, h)


def parse_snapshot(
    snapshot: str,
    *,
    tab: str = "",
    boxes: Mapping[str, tuple[int, int, int, int]] | None = None,
    keys: KeyCache | None = None,
) -> tuple[Element, ...]:
    """The elements of an ai-mode ARIA snapshot, in document order: one per node with a ref.

    Args:
        snapshot: ``page.aria_snapshot(mode="ai")``'s text (with or without boxes).
        tab: the tab it was taken in.
        boxes: the bounding box ``(x, y, width, height)`` of each ref, measured in the page
            (a ``[box=...]`` in the snapshot is used for a ref not in it).
        keys: parsed keys kept from earlier snapshots of the same page (faster).

    Raises:
        SnapshotFormatError: not even PyYAML can read it as a YAML sequence.
    """
    if not snapshot:
        return ()
    keys = keys or KeyCache()
    try:
        return _build(_line_items(snapshot), tab, boxes or {}, keys)
    except SnapshotFormatError as exc:
        log.info("snapshot outside Playwright's YAML subset (%s): parsed with PyYAML", exc)
    import yaml

    try:
        return _build(_yaml_items(snapshot), tab, boxes or {}, keys)
    except yaml.YAMLError as exc:
        raise SnapshotFormatError(f"the snapshot is not YAML: {exc}") from exc
