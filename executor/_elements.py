"""The structured element list of an observation, and finding an element in it.

An observation of a browser page carries, besides the snapshot text, one ``Element`` per
node of Playwright's ARIA tree that has a ref: its role and accessible name, the tab and
frame it is in, its states, its bounding box and the containers it sits in (row, list
item, dialog, form) and the heading it sits under. The executor resolves a cited ref
*only* from this list (invariant 12), never by searching the snapshot text a page
controls; the SDK's ``find`` looks elements up in it:

    find(elements, "button", "Cancel", within=("row", "Plan E"))

The list is built from the snapshot by ``_ariatree.parse_snapshot``; this module is the
data and the lookup, shared by the executor and the SDK.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from handrail.executor._errors import AmbiguousElementError, ElementNotFoundError

__all__ = [
    "CONTEXT_ROLES",
    "Box",
    "Context",
    "Element",
    "describe",
    "find",
    "find_all",
]


class Box(NamedTuple):
    """A bounding box in CSS pixels, relative to the tab's viewport (``getBoundingClientRect``)."""

    x: int
    y: int
    width: int
    height: int


class Context(NamedTuple):
    """A container an element sits in (or the heading it sits under).

    ``name`` is the container's accessible name; a row, list item, dialog or form that
    has none is named by its content instead (the names and text inside it, joined by
    spaces, at most 200 characters), so that a row of a table reads ``"Plan E €25 / month
    Active Cancel"``. ``ref`` is the container's own ref ("" when it has none).
    """

    role: str
    name: str
    ref: str = ""


# Element field -> the roles that make a container of that kind.
CONTEXT_ROLES: Mapping[str, frozenset[str]] = {
    "row": frozenset({"row"}),
    "list_item": frozenset({"listitem", "treeitem", "article"}),
    "dialog": frozenset({"dialog", "alertdialog"}),
    "form": frozenset({"form"}),
}


class Element(NamedTuple):
    """One node of an observation's ARIA tree that has a ref (immutable; a named tuple,
    because an observation of a large page holds thousands).

    Attributes:
        ref: the ref actions cite (``e12``; ``f2e7`` in another document).
        role, name: the ARIA role and accessible name, as Playwright computed them (a
            name over 900 characters is left out by Playwright: "").
        tab_id: the tab the element is in.
        frame: "" when the element is in the tab's top document; else the ref of the
            ``iframe`` element whose document it is in.
        text: the node's own text, when it has a single one (a field's value, a
            paragraph's words), at most 200 characters.
        url: a link's target, as written in its ``href``.
        placeholder: a text field's placeholder, when it is not its name.
        disabled, expanded, selected, focused: ARIA states (``focused``: the element has
            the keyboard focus, Playwright's ``[active]``).
        checked, pressed: ``"true"``, ``"mixed"``, or ``""`` (not checked / not pressed,
            or not a checkable / pressable role).
        level: a heading's level (1-6), else 0.
        invalid: ``"true"``, ``"grammar"``, ``"spelling"`` or ``""``.
        box: where it is in the viewport, None when not measured (a child frame's
            element, or an element Playwright reported without a box).
        parent: the ref of the nearest ancestor that has one ("" at the top).
        row, list_item, dialog, form: the nearest container of that kind it sits in.
        heading: the nearest heading before it in its container (a dialog's title, a
            section's heading), if any.
    """

    ref: str
    role: str
    name: str
    tab_id: str = ""
    frame: str = ""
    text: str = ""
    url: str = ""
    placeholder: str = ""
    disabled: bool = False
    expanded: bool = False
    selected: bool = False
    focused: bool = False
    checked: str = ""
    pressed: str = ""
    level: int = 0
    invalid: str = ""
    box: Box | None = None
    parent: str = ""
    row: Context | None = None
    list_item: Context | None = None
    dialog: Context | None = None
    form: Context | None = None
    heading: Context | None = None

    def contexts(self) -> list[tuple[str, Context]]:
        """The element's containers and heading, nearest kinds first: ``[("row", ...), ...]``."""
        found = [(k, getattr(self, k)) for k in ("row", "list_item", "dialog", "form", "heading")]
        return [(k, c) for k, c in found if c is not None]


def describe(element: Element) -> str:
    """``button "Cancel" (e41) in row "Plan E €25 / month Active Cancel"``."""
    text = f"{element.role} {element.name!r} ({element.ref})"
    for kind, context in element.contexts()[:2]:
        where = "under" if kind == "heading" else "in"
        text += f" {where} {context.role} {_short(context.name)!r}"
    return text


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _words(needle: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(needle) + r"(?!\w)")


@runtime_checkable
class _Lookup(Protocol):
    """A list that finds its elements without building them all (the SDK's lazy list)."""

    def matching(self, role: str, name: str) -> list[Element]: ...

    def get(self, ref: str) -> Element | None: ...


_LOOKUPS = (_Lookup,)


def _containers(element: Element, get: Callable[[str], Element | None], role: str) -> list[str]:
    """The names of the element's containers of ``role`` (its ancestors, its contexts)."""
    names = [c.name for _, c in element.contexts() if c.role == role]
    seen = 0
    ref = element.parent
    while ref and seen < 64:  # a tree is shallow; the bound keeps a malformed list finite
        ancestor = get(ref)
        if ancestor is None:
            break
        if ancestor.role == role and ancestor.name:
            names.append(ancestor.name)
        ref, seen = ancestor.parent, seen + 1
    return names


def find_all(
    elements: Iterable[Element],
    role: str,
    name: str,
    *,
    within: tuple[str, str] | None = None,
) -> list[Element]:
    """Every element with this role and accessible name (exactly), in document order.

    ``within=(role, name)`` keeps those that sit in a container of that role (an
    ancestor, or a row / list item / dialog / form / heading context) whose name is
    ``name``, or, when no container's name is exactly that, contains it as whole words
    (``("row", "Plan E")`` matches the row ``"Plan E €25 / month Active Cancel"`` and not
    ``"Plan EE ..."``).
    """
    get: Callable[[str], Element | None]
    hits: list[Element]
    if isinstance(elements, _LOOKUPS):
        lookup: Any = elements
        hits, get = lookup.matching(role, name), lookup.get
    else:
        listed = list(elements)
        hits = [e for e in listed if e.role == role and e.name == name]
        get = {e.ref: e for e in listed}.get if within is not None else dict[str, Element]().get
    if within is None:
        return hits
    c_role, c_name = within
    exact: list[Element] = []
    words: list[Element] = []
    pattern = _words(c_name)
    for element in hits:
        names = _containers(element, get, c_role)
        if c_name in names:
            exact.append(element)
        elif any(pattern.search(n) for n in names):
            words.append(element)
    return exact or words


def find(
    elements: Iterable[Element],
    role: str,
    name: str,
    *,
    within: tuple[str, str] | None = None,
    where: str = "the observation",
) -> Element:
    """The one element with this role and name (``within`` a container, if given).

    Raises:
        ElementNotFoundError: none matches; the message says what is there instead.
        AmbiguousElementError: more than one matches; the message lists them.
    """
    hits = find_all(elements, role, name, within=within)
    scope = f" within {within[0]} {within[1]!r}" if within else ""
    if len(hits) == 1:
        return hits[0]
    listed = list(elements)
    if not hits:
        same = find_all(listed, role, name)
        if same:
            shown = "; ".join(describe(e) for e in same[:5])
            more = f" (and {len(same) - 5} more)" if len(same) > 5 else ""
            hint = f"; {len(same)} {role} {name!r} elsewhere: {shown}{more}"
        else:
            named = [e for e in listed if e.name == name][:3]
            hint = "; same name: " + "; ".join(describe(e) for e in named) if named else ""
        raise ElementNotFoundError(f"no {role} {name!r}{scope} in {where}{hint}", role, name, within)
    shown = "; ".join(describe(e) for e in hits[:5])
    more = f" (and {len(hits) - 5} more)" if len(hits) > 5 else ""
    raise AmbiguousElementError(
        f"{len(hits)} elements are {role} {name!r}{scope} in {where}: {shown}{more}; "
        f"narrow it with within=(role, name)",
        role,
        name,
        within,
        tuple(e.ref for e in hits),
    )
