"""The structured element list on the wire (part of ``_wire``: the element messages).

An observation of a large page carries thousands of elements, so both ways are built for
it: the executor keeps each element's encoded bytes while the page shows it, and puts the
whole list into the message at C speed (``elements_blob``); the SDK decodes the list only
when it is first used (``LazyElements``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from handrail.executor._elements import Box, Context, Element
from handrail.proto.executor.v1 import executor_pb2 as pb

__all__ = ["LazyElements", "element_from_pb", "element_pb", "elements_blob"]


def _context(c: pb.ElementContext, present: bool) -> Context | None:
    return Context(c.role, c.name, c.ref) if present else None


def element_from_pb(e: pb.Element) -> Element:
    b = e.box
    return Element(
        e.ref,
        e.role,
        e.name,
        e.tab_id,
        e.frame,
        e.text,
        e.url,
        e.placeholder,
        e.disabled,
        e.expanded,
        e.selected,
        e.focused,
        e.checked,
        e.pressed,
        e.level,
        e.invalid,
        Box(b.x, b.y, b.width, b.height) if e.HasField("box") else None,
        e.parent,
        _context(e.row, e.HasField("row")),
        _context(e.list_item, e.HasField("list_item")),
        _context(e.dialog, e.HasField("dialog")),
        _context(e.form, e.HasField("form")),
        _context(e.heading, e.HasField("heading")),
    )


class LazyElements(Sequence[Element]):
    """An observation's element list as the SDK receives it, decoded on first use.

    A page of thousands of controls has thousands of elements: an agent that never looks
    them up does not pay for turning them into ``Element`` tuples, and ``find`` (through
    ``matching`` and ``get``) decodes only the elements it looks at.
    """

    __slots__ = ("_decoded", "_one", "_positions", "_raw")

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._decoded: tuple[Element, ...] | None = None
        self._positions: dict[str, int] | None = None
        self._one: dict[int, Element] = {}

    def _all(self) -> tuple[Element, ...]:
        if self._decoded is None:
            self._decoded = tuple(self._at(i) for i in range(len(self._raw)))
            self._raw, self._one = None, {}
        return self._decoded

    def _at(self, i: int) -> Element:
        element = self._one.get(i)
        if element is None:
            element = self._one[i] = element_from_pb(self._raw[i])
        return element

    def matching(self, role: str, name: str) -> list[Element]:
        """The elements with this role and name, decoding only those."""
        if self._decoded is not None:
            return [e for e in self._decoded if e.role == role and e.name == name]
        return [self._at(i) for i, e in enumerate(self._raw) if e.role == role and e.name == name]

    def get(self, ref: str) -> Element | None:
        """The element of ``ref``, or None."""
        if self._decoded is not None:
            return next((e for e in self._decoded if e.ref == ref), None)
        if self._positions is None:
            self._positions = {e.ref: i for i, e in enumerate(self._raw)}
        i = self._positions.get(ref)
        return None if i is None else self._at(i)

    def __len__(self) -> int:
        return len(self._decoded if self._decoded is not None else self._raw)

    @overload
    def __getitem__(self, index: int) -> Element: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Element]: ...

    def __getitem__(self, index: int | slice) -> Element | Sequence[Element]:
        return self._all()[index]

    def __iter__(self) -> Iterator[Element]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return f"LazyElements({len(self)} elements)"


def _context_pb(c: Context | None) -> pb.ElementContext | None:
    return None if c is None else pb.ElementContext(role=c.role, name=c.name, ref=c.ref)


def element_pb(e: Element) -> pb.Element:
    box = e.box
    return pb.Element(
        ref=e.ref,
        role=e.role,
        name=e.name,
        tab_id=e.tab_id,
        frame=e.frame,
        text=e.text,
        url=e.url,
        placeholder=e.placeholder,
        disabled=e.disabled,
        expanded=e.expanded,
        selected=e.selected,
        focused=e.focused,
        checked=e.checked,
        pressed=e.pressed,
        level=e.level,
        invalid=e.invalid,
        box=None if box is None else pb.Box(x=box.x, y=box.y, width=box.width, height=box.height),
        parent=e.parent,
        row=_context_pb(e.row),
        list_item=_context_pb(e.list_item),
        dialog=_context_pb(e.dialog),
        form=_context_pb(e.form),
        heading=_context_pb(e.heading),
    )


# The key of Observation.elements on the wire (field 22, length-delimited).
_ELEMENTS_TAG = bytes([(22 << 3 | 2) & 0x7F | 0x80, (22 << 3 | 2) >> 7])
assert pb.Observation.ELEMENTS_FIELD_NUMBER == 22


class _ElementBytes:
    """Each element's wire bytes, kept while the page shows it: an observation of a page
    that changed in a few places re-encodes only those elements (and one that did not
    change, none), then the whole list goes into the message at C speed."""

    def __init__(self, limit: int = 100_000) -> None:
        self._bytes: dict[Element, bytes] = {}
        self._last: tuple[Sequence[Element], bytes] = ((), b"")
        self._limit = limit

    def blob(self, elements: Sequence[Element]) -> bytes:
        if elements is self._last[0]:
            return self._last[1]
        if len(self._bytes) > self._limit:
            self._bytes.clear()
        cache, parts = self._bytes, []
        for e in elements:
            raw = cache.get(e)
            if raw is None:
                body = element_pb(e).SerializeToString()
                raw = cache[e] = _ELEMENTS_TAG + _varint(len(body)) + body
            parts.append(raw)
        blob = b"".join(parts)
        self._last = (elements, blob)
        return blob


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


_element_bytes = _ElementBytes()


def elements_blob(elements: Sequence[Element]) -> bytes:
    """``elements`` as the wire bytes of ``Observation.elements`` (to merge into one)."""
    return _element_bytes.blob(elements)
