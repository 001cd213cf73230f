"""Which policies can fire for a request, found without asking Cedar.

cedarpy's cost grows with the size of the policy set it is handed, whether or not the
policies apply. Most standing rules are narrow — one agent, one origin, one window class,
one verb — so the engine hands Cedar only the policies that *can* fire for the request at
hand and caches the resulting policy sets.

A policy is left out only when a necessary condition of it is false for the request:

* its action scope excludes the verb (``action == Action::"upload"``);
* its principal scope names another agent (``principal == Agent::"x"``);
* a leading conjunct of its first ``when`` clause is false: ``context.F == "literal"``,
  ``context.F like "pattern"``, a boolean ``context.F``, or ``action == / != Action::"v"``.

Only the *leading* run of such simple conjuncts is used: Cedar evaluates ``&&`` left to
right and stops at the first false operand, so a policy left out here is one Cedar would
have found not to fire without evaluating anything else (context attributes always exist:
the schema declares them and the engine always sends them).

A policy with an ``unless`` clause is also left out when its condition is certainly false:
its clauses, read left to right as Cedar does (``when {a} unless {b}`` is ``a && !b``),
reach a ``when`` that is false or an ``unless`` that is true before anything that is not
one of the simple shapes above, or that could fail to evaluate (a missing attribute, a
value of the wrong type). Cedar would find that policy not to fire without an error. The
shipped navigation rule is one: ``unless { context.origin == "" || context.origin_granted }``
is true for every navigation to a granted origin. Everything else is left to Cedar, which
sees the policy whenever it cannot be ruled out.

Cedar's cost also grows with the size of the request context it parses (a few µs per
attribute), so each policy records the context attributes it reads (:func:`context_attrs`)
and Cedar is sent only those of the policies it is handed. A policy reads an attribute only
through ``context.F`` or ``context has F``; one that uses ``context`` any other way is sent
the whole context.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The context attributes a guard may test (the string and boolean ones of the schema).
_STRING_FIELDS = frozenset(
    {
        "target",
        "url",
        "origin",
        "path",
        "element_role",
        "element_name",
        "element_name_lower",
        "window_class",
        "window_title",
        "grant_task",
        "dialog_title",
        "form_name",
        "heading",
        "description",
        "risk",
    }
)
_BOOL_FIELDS = frozenset(
    {
        "password_field",
        "has_grant",
        "origin_granted",
        "grant_allows_password",
        "grant_single_use",
        "origin_is_console",
        "document_load",
        "destructive",
    }
)


@dataclass(frozen=True)
class Guard:
    """A necessary condition of a policy.

    ``kind`` is ``eq`` (``context.F == "v"``), ``like`` (``context.F like "p"``), ``true``
    (boolean ``context.F``), ``verb`` (``action ==``/``!= Action::"v"``) or ``any`` (a
    disjunction of guards, ``options``).
    """

    kind: str
    field: str = ""
    value: str = ""
    pattern: re.Pattern[str] | None = None
    negate: bool = False
    options: tuple[Guard, ...] = ()
    needle: str = ""  # like: a literal the value must contain (a cheap first test)
    needles: tuple[str, ...] = ()  # like: the value contains one of these, or it cannot match

    def holds(self, context: dict[str, Any], verb: str) -> bool:
        """Whether the condition is true for this request."""
        if self.kind == "any":
            return any(g.holds(context, verb) for g in self.options)
        if self.kind == "eq":
            return bool(context.get(self.field) == self.value)
        if self.kind == "like":
            assert self.pattern is not None
            value = str(context.get(self.field, ""))
            if self.needle not in value:
                return False
            return self.pattern.fullmatch(value) is not None
        if self.kind == "true":
            return context.get(self.field) is True
        return (verb == self.value) != self.negate  # verb

    def certain(self, context: dict[str, Any], verb: str) -> bool | None:
        """What Cedar would make of the condition, or None when it could fail to evaluate
        (an attribute missing or of the wrong type)."""
        if self.kind == "any":  # ``||``, left to right: an error stops it
            for option in self.options:
                value = option.certain(context, verb)
                if value is None or value:
                    return value
            return False
        if self.kind == "verb":
            return (verb == self.value) != self.negate
        found = context.get(self.field)
        if self.kind == "eq":
            return None if self.field not in context else bool(found == self.value)
        if self.kind == "like":
            return None if not isinstance(found, str) else self.holds(context, verb)
        return found if isinstance(found, bool) else None  # true


#: A policy's condition as :func:`condition_of` reads it: its clauses in order, each
#: ``(is_unless, conjuncts)`` with None for a conjunct that is not a :class:`Guard`.
Condition = tuple[tuple[bool, tuple[Guard | None, ...]], ...]


def condition_of(policy: Any) -> Condition | None:
    """The condition of a policy that has an ``unless`` clause (None for the others: their
    leading guards say all that can be said without Cedar)."""
    clauses = list(policy.clauses)
    if not any(type(c).__name__ == "Unless" for c in clauses):
        return None
    return tuple(
        (type(c).__name__ == "Unless", tuple(_guard(conjunct) for conjunct in _conjuncts(c.expr))) for c in clauses
    )


def surely_false(condition: Condition, context: dict[str, Any], verb: str) -> bool:
    """Whether Cedar would certainly find ``condition`` false, without an error."""
    for is_unless, conjuncts in condition:
        value = True
        for guard in conjuncts:
            known = None if guard is None else guard.certain(context, verb)
            if known is None:
                return False  # Cedar could find it true, or fail: it must see the policy
            if not known:
                value = False
                break
        if value == is_unless:  # a false ``when`` or a true ``unless``
            return True
    return False


def _context_attr(node: Any) -> str | None:
    if type(node).__name__ == "GetAttr" and type(node.base).__name__ == "Var" and node.base.name == "context":
        return str(node.attr)
    return None


def _like_regex(pattern: Sequence[Any]) -> tuple[re.Pattern[str], str]:
    """Cedar's ``like`` pattern as a regex, and its longest literal run."""
    parts, runs, run = [], [], ""
    for element in pattern:
        if type(element).__name__ == "Wildcard":
            parts.append(".*")
            runs.append(run)
            run = ""
        else:
            parts.append(re.escape(element.value))
            run += element.value
    runs.append(run)
    return re.compile("".join(parts), re.DOTALL), max(runs, key=len)


def _guard(node: Any) -> Guard | None:
    """The guard ``node`` expresses, or None when it is not one of the simple shapes."""
    kind = type(node).__name__
    if kind == "BinaryOp" and node.op == "or":
        left, right = _guard(node.left), _guard(node.right)
        if left is None or right is None:
            return None
        options = [*(left.options or (left,)), *(right.options or (right,))]
        fields = {g.field for g in options}
        if all(g.kind == "like" and g.pattern is not None for g in options) and len(fields) == 1:
            # one regex for a disjunction of patterns on one field
            combined = "|".join(f"(?:{g.pattern.pattern})" for g in options if g.pattern)
            needles = tuple(n for g in options for n in g.needles)
            return Guard("like", fields.pop(), pattern=re.compile(combined, re.DOTALL), needles=needles)
        return Guard("any", options=tuple(options))
    field = _context_attr(node)
    if field in _BOOL_FIELDS:
        return Guard("true", field)
    if kind == "Like":
        field = _context_attr(node.base)
        if field in _STRING_FIELDS:
            regex, needle = _like_regex(node.pattern)
            return Guard("like", field, pattern=regex, needle=needle, needles=(needle,))
        return None
    if kind != "BinaryOp" or node.op not in ("eq", "not_eq"):
        return None
    for left, right in ((node.left, node.right), (node.right, node.left)):
        field = _context_attr(left)
        if field in _STRING_FIELDS and type(right).__name__ == "StringLit" and node.op == "eq":
            return Guard("eq", field, str(right.value))
        if type(left).__name__ == "Var" and left.name == "action" and type(right).__name__ == "EntityLit":
            uid = right.value
            if uid.type.basename == "Action" and not uid.type.namespace:
                return Guard("verb", value=str(uid.id), negate=node.op == "not_eq")
    return None


def _conjuncts(node: Any) -> list[Any]:
    """``a && b && c`` as ``[a, b, c]``, left to right."""
    if type(node).__name__ == "BinaryOp" and node.op == "and":
        return [*_conjuncts(node.left), *_conjuncts(node.right)]
    return [node]


def guards_of(policy: Any) -> tuple[str | None, tuple[Guard, ...]]:
    """The principal a policy is limited to (or None) and its leading guards."""
    principal = None
    scope = policy.principal
    if type(scope).__name__ == "ScopeEq" and scope.entity.type.basename == "Agent":
        principal = str(scope.entity.id)
    guards: list[Guard] = []
    clauses = list(policy.clauses)
    if clauses and type(clauses[0]).__name__ == "When":
        for conjunct in _conjuncts(clauses[0].expr):
            guard = _guard(conjunct)
            if guard is None:
                break
            guards.append(guard)
    return principal, tuple(guards)


def context_attrs(policy: Any) -> frozenset[str] | None:
    """The context attributes ``policy`` (a PST node) reads, or None when it may read any.

    Every use of the variable ``context`` must be the base of ``context.F`` or
    ``context has F``; any other use (the record as a whole) gives None.
    """
    found: set[str] = set()

    def walk(node: Any) -> bool:
        kind = type(node).__name__
        if kind in ("GetAttr", "HasAttr") and _is_context(node.base):
            found.update([node.attr] if kind == "GetAttr" else node.attrs[:1])
            return True
        if _is_context(node):
            return False
        if isinstance(node, (str, bytes, int, float, bool)) or node is None:
            return True
        if isinstance(node, Mapping):
            return all(walk(v) for v in node.values())
        if isinstance(node, (tuple, list)):
            return all(walk(v) for v in node)
        if dataclasses.is_dataclass(node):
            return all(walk(getattr(node, f.name)) for f in dataclasses.fields(node))
        return False  # a node shape this walk does not know: send everything

    return frozenset(found) if walk(list(policy.clauses)) else None


def _is_context(node: Any) -> bool:
    return type(node).__name__ == "Var" and node.name == "context"


@dataclass(frozen=True)
class Indexed:
    """One policy as the index knows it."""

    position: int
    principal: str | None
    guards: tuple[Guard, ...]
    condition: Condition | None = None


class VerbIndex:
    """The policies of one verb, bucketed by their most selective guard."""

    def __init__(self, policies: Sequence[Indexed]) -> None:
        self.unguarded: list[Indexed] = []
        self.by_principal: dict[str, list[Indexed]] = {}
        self.by_eq: dict[str, dict[str, list[Indexed]]] = {}  # field -> value -> policies
        self.by_flag: dict[str, list[Indexed]] = {}  # a boolean context.F guards them
        self.others: list[Indexed] = []  # guarded by verb or an unless: checked one by one
        likes: dict[str, list[Indexed]] = {}
        for p in policies:
            eq = next((g for g in p.guards if g.kind == "eq"), None)
            like = next((g for g in p.guards if g.kind == "like"), None)
            flag = next((g for g in p.guards if g.kind == "true"), None)
            if eq is not None:
                self.by_eq.setdefault(eq.field, {}).setdefault(eq.value, []).append(p)
            elif p.principal is not None:
                self.by_principal.setdefault(p.principal, []).append(p)
            elif like is not None:
                likes.setdefault(like.field, []).append(p)
            elif flag is not None:
                self.by_flag.setdefault(flag.field, []).append(p)
            elif p.guards or p.condition is not None:
                self.others.append(p)
            else:
                self.unguarded.append(p)
        # One regex per field rejects, in one call, every like-guarded policy of that field;
        # before it, a search for the literals one of which a match must contain (a value
        # that holds none of them, the usual case, is rejected without backtracking).
        self.like_groups: list[tuple[str, re.Pattern[str] | None, re.Pattern[str], list[Indexed]]] = []
        for field, members in likes.items():
            guards = [next(g for g in m.guards if g.kind == "like") for m in members]
            combined = "|".join(f"(?:{g.pattern.pattern})" for g in guards if g.pattern is not None)
            literals = None
            if all(g.needles and all(g.needles) for g in guards):
                needles = sorted({n for g in guards for n in g.needles}, key=len, reverse=True)
                literals = re.compile("|".join(map(re.escape, needles)), re.DOTALL)
            self.like_groups.append((field, literals, re.compile(combined, re.DOTALL), members))

    def candidates(self, principal: str, context: dict[str, Any], verb: str) -> tuple[int, ...]:
        """Positions of the policies that can fire, in load order."""
        found = [p.position for p in self.unguarded]
        pool = self.by_principal.get(principal)
        if pool:
            _add_holding(found, pool, principal, context, verb)
        for field, by_value in self.by_eq.items():
            pool = by_value.get(context.get(field))  # type: ignore[arg-type]
            if pool:
                _add_holding(found, pool, principal, context, verb)
        for field, pool in self.by_flag.items():
            if context.get(field) is True:  # the flag's guard holds (most flags are false)
                _add_holding(found, pool, principal, context, verb)
        _add_holding(found, self.others, principal, context, verb)
        for field, literals, combined, members in self.like_groups:
            value = str(context.get(field, ""))
            if literals is not None and literals.search(value) is None:
                continue
            if combined.fullmatch(value) is not None:
                _add_holding(found, members, principal, context, verb)
        if len(found) > 1:
            found.sort()
        return tuple(found)


def _add_holding(found: list[int], pool: Sequence[Indexed], principal: str, context: dict[str, Any], verb: str) -> None:
    """Append the positions of the policies of ``pool`` whose principal and guards hold."""
    for p in pool:
        if p.principal is not None and p.principal != principal:
            continue
        for guard in p.guards:
            if not guard.holds(context, verb):
                break
        else:
            if p.condition is None or not surely_false(p.condition, context, verb):
                found.append(p.position)


class SetCache:
    """A small LRU of built policy sets, keyed by the positions they hold."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._sets: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[int, ...]) -> Any | None:
        with self._lock:
            found = self._sets.get(key)
            if found is not None:
                self._sets.move_to_end(key)
            return found

    def put(self, key: tuple[int, ...], value: Any) -> None:
        with self._lock:
            self._sets[key] = value
            self._sets.move_to_end(key)
            while len(self._sets) > self._size:
                self._sets.popitem(last=False)
