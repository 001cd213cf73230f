"""Standing rules in Cedar: loading, validating and evaluating the policy files.

Grants decide what is permitted; Cedar is consulted only for ``forbid`` rules. The engine
adds one internal permit-all policy, so a Cedar *Deny* means a ``forbid`` fired, and the
decision names the ``@id`` of each forbid that did. A forbid annotated
``@approval("required")`` does not refuse outright: the action needs an operator's approval
(optionally within ``@approval_timeout_s("120")`` seconds).

Cedar is asked once per candidate grant, with the grant's facts in the context
(``grant_verbs``, ``grant_allows_password``, ``origin_granted`` ...), so a policy can say
"not unless the grant says so".

cedarpy's evaluation cost grows with the size of the policy set, not with how many policies
apply, so the engine hands Cedar only the policies that can fire for the request (see
:mod:`._policy_index`: action and principal scopes, leading ``when`` guards) and caches the
policy sets it builds, and sends Cedar only the context attributes those policies read. The
result is the same as evaluating the whole set with the whole context.

Every ``*.cedar`` file of the policies directory is loaded, each policy must carry an
``@id("...")`` annotation, and all are validated against ``schema.cedarschema`` (the shipped
schema when the directory has none). cedarpy reports no source offsets, so the line of an
error is that of the statement it belongs to: files are split into statements at top-level
``;`` and each statement is parsed on its own.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cedarpy

from handrail._vocabulary import VERBS
from handrail.authz._decide import url_path
from handrail.authz._errors import PolicyError
from handrail.authz._models import CheckInput, GrantInfo, PolicyResult
from handrail.authz._policy_index import (
    Condition,
    Guard,
    Indexed,
    SetCache,
    VerbIndex,
    condition_of,
    context_attrs,
    guards_of,
)
from handrail.authz._risk import RiskClass, RiskInput, classify
from handrail.authz._text import fold

#: The policies shipped with the package.
DEFAULT_POLICIES_DIR = Path(__file__).resolve().parent / "policies"
SCHEMA_NAME = "schema.cedarschema"

_PERMIT_ALL_ID = "handrail-internal-permit-all"
_PERMIT_ALL = f'\n@id("{_PERMIT_ALL_ID}")\npermit (principal, action, resource);\n'
_POLICY_REF = re.compile(r"\bpolicy\d+\b")


@dataclass(frozen=True)
class Statement:
    """One policy statement of a file: its text and the 1-based line it starts on."""

    text: str
    line: int


def split_statements(source: str) -> list[Statement]:
    """Split Cedar policy text into statements at ``;`` outside strings and comments.

    Text after the last ``;`` is returned as a statement too when it holds anything besides
    whitespace and comments (so that a missing ``;`` is reported where it happens).
    """
    statements: list[Statement] = []
    start = 0
    first: int | None = None  # offset of the statement's first significant character
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch == "/" and source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch.isspace():
            i += 1
            continue
        if first is None:
            first = i
        if ch == '"':
            i += 1
            while i < n and source[i] != '"':
                i += 2 if source[i] == "\\" else 1
            i += 1
            continue
        if ch == ";":
            statements.append(Statement(source[start : i + 1], source.count("\n", 0, first) + 1))
            start, first = i + 1, None
        i += 1
    if first is not None:
        statements.append(Statement(source[start:], source.count("\n", 0, first) + 1))
    return statements


def _load_schema(directory: Path) -> cedarpy.Schema:
    path = directory / SCHEMA_NAME
    if not path.is_file():
        path = DEFAULT_POLICIES_DIR / SCHEMA_NAME
    try:
        return cedarpy.Schema.from_str(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PolicyError(str(path), 1, f"schema does not parse: {exc}") from None


@dataclass(frozen=True)
class PolicyInfo:
    """One loaded policy: where it is, which verbs its scope can match, its annotations.

    Attributes:
        policy_id: its ``@id``.
        file: the file it is in.
        line: the line its statement starts on.
        text: its source text.
        verbs: the verbs its action scope can match.
        approval: it is annotated ``@approval("required")``.
        approval_timeout_ms: from ``@approval_timeout_s``; 0 when not set.
        principal: the agent its principal scope names, if any.
        guards: the leading conditions of its ``when`` clause (see :mod:`._policy_index`).
        context_attrs: the context attributes it reads; None when it may read any.
        condition: its clauses, when it has an ``unless`` (see :func:`._policy_index.surely_false`).
    """

    policy_id: str
    file: str
    line: int
    text: str
    verbs: frozenset[str]
    approval: bool = False
    approval_timeout_ms: int = 0
    principal: str | None = None
    guards: tuple[Guard, ...] = ()
    context_attrs: frozenset[str] | None = None
    condition: Condition | None = None


def _scope_verbs(action: Any) -> frozenset[str]:
    """The verbs a policy's action scope can match (all of them when unsure)."""
    kind = type(action).__name__
    if kind == "ActionEq":
        ids = {action.entity.id}
    elif kind == "ActionIn":
        ids = {e.id for e in action.entities}
    else:
        return frozenset(VERBS)
    if not ids <= set(VERBS):  # an action group: it may contain anything
        return frozenset(VERBS)
    return frozenset(ids)


def _annotations(path: Path, line: int, notes: Mapping[str, str]) -> tuple[bool, int]:
    approval = notes.get("approval")
    if approval is not None and approval != "required":
        raise PolicyError(str(path), line, f'@approval must be "required", not {approval!r}')
    timeout = notes.get("approval_timeout_s")
    timeout_ms = 0
    if timeout is not None:
        if approval is None:
            raise PolicyError(str(path), line, "@approval_timeout_s needs @approval")
        try:
            timeout_ms = int(float(timeout) * 1000)
        except ValueError:
            timeout_ms = -1
        if timeout_ms <= 0:
            raise PolicyError(str(path), line, f"@approval_timeout_s must be a positive number, not {timeout!r}")
    return approval is not None, timeout_ms


def _check_file(path: Path, schema: cedarpy.Schema, seen: dict[str, str], infos: list[PolicyInfo]) -> str:
    """Parse and validate one policy file; record its policies in ``seen`` and ``infos``."""
    text = path.read_text(encoding="utf-8")
    statements = split_statements(text)
    for stmt in statements:
        try:
            nodes = cedarpy.PolicySet.from_str(stmt.text).to_pst()
        except ValueError as exc:
            raise PolicyError(str(path), stmt.line, f"does not parse: {exc}") from None
        for policy in [*nodes.static_policies.values(), *nodes.templates.values()]:
            pid = policy.annotations.get("id")
            if not pid:
                raise PolicyError(str(path), stmt.line, 'policy has no @id("...") annotation')
            where = f"{path}:{stmt.line}"
            if pid in seen or pid == _PERMIT_ALL_ID:
                raise PolicyError(str(path), stmt.line, f"@id {pid!r} is used twice (also at {seen.get(pid)})")
            seen[pid] = where
            approval, timeout_ms = _annotations(path, stmt.line, policy.annotations)
            principal, guards = guards_of(policy)
            infos.append(
                PolicyInfo(
                    pid,
                    str(path),
                    stmt.line,
                    stmt.text.strip(),
                    _scope_verbs(policy.action),
                    approval,
                    timeout_ms,
                    principal,
                    guards,
                    context_attrs(policy),
                    condition_of(policy),
                )
            )
    result = cedarpy.validate_policies(text, schema)
    if not result.validation_passed:
        error = result.errors[0]
        line = 1
        match = re.fullmatch(r"policy(\d+)", error.policy_id or "")
        if match and int(match.group(1)) < len(statements):
            line = statements[int(match.group(1))].line
        raise PolicyError(str(path), line, f"does not validate against the schema: {error.error}")
    return text


class PolicyEngine:
    """A parsed, validated Cedar policy set, reused across checks.

    Build it with :meth:`load`. :meth:`evaluate` is thread-safe (the handles are immutable).

    Attributes:
        directory: where it was loaded from.
        policies: every loaded policy, in load order.
        policy_ids: the ``@id`` of every loaded policy, in load order.
    """

    def __init__(self, directory: Path, policies: tuple[PolicyInfo, ...]) -> None:
        self.directory = directory
        self.policies = policies
        self.policy_ids = tuple(p.policy_id for p in policies)
        self._by_id = {p.policy_id: p for p in policies}
        self._entities = cedarpy.Entities.from_json_str("[]")
        self._index: dict[str, VerbIndex] = {}
        self._sizes: dict[str, int] = {}
        for verb in VERBS:
            mine = [Indexed(i, p.principal, p.guards, p.condition) for i, p in enumerate(policies) if verb in p.verbs]
            self._index[verb] = VerbIndex(mine)
            self._sizes[verb] = len(mine)
        self._sets = SetCache()
        self.last_evaluated = 0
        """How many policies the latest :meth:`evaluate` handed to Cedar (for tests)."""

    def _policy_set(self, key: tuple[int, ...]) -> tuple[cedarpy.PolicySet, frozenset[str] | None]:
        """The Cedar policy set of the policies at ``key`` (plus permit-all), and the context
        attributes they read (None: any)."""
        found: tuple[cedarpy.PolicySet, frozenset[str] | None] | None = self._sets.get(key)
        if found is None:
            chosen = [self.policies[i] for i in key]
            attrs: frozenset[str] | None = frozenset()
            for policy in chosen:
                if attrs is None or policy.context_attrs is None:
                    attrs = None
                else:
                    attrs |= policy.context_attrs
            texts = [p.text for p in chosen]
            found = (cedarpy.PolicySet.from_str("\n".join([*texts, _PERMIT_ALL])), attrs)
            self._sets.put(key, found)
        return found

    @classmethod
    def load(cls, directory: str | Path | None = None) -> PolicyEngine:
        """Load and validate every ``*.cedar`` file of ``directory`` (default: the shipped one).

        Raises:
            PolicyError: a file does not parse or validate, a policy lacks an ``@id`` or has a
                bad annotation; ``str(error)`` reads ``FILE:LINE: message``.
        """
        path = Path(directory) if directory is not None else DEFAULT_POLICIES_DIR
        if not path.is_dir():
            raise PolicyError(str(path), 1, "policies directory does not exist")
        schema = _load_schema(path)
        seen: dict[str, str] = {}
        infos: list[PolicyInfo] = []
        for file in sorted(path.glob("*.cedar")):
            _check_file(file, schema, seen, infos)
        return cls(path, tuple(infos))

    def info(self, policy_id: str) -> PolicyInfo | None:
        """The loaded policy with that ``@id``, if any."""
        return self._by_id.get(policy_id)

    def size_for(self, verb: str) -> int:
        """How many policies are evaluated for ``verb``."""
        return self._sizes.get(verb, 0)

    @staticmethod
    def base_context(request: CheckInput, origin: str, path: str, *, console: bool = False) -> dict[str, Any]:
        """The part of the Cedar context that does not depend on the grant.

        It carries the element's risk class, classified here from its name and context
        (:mod:`._risk`), so that a standing policy can say "not unless the grant says so".
        ``console``: the URL is served by the operator console (``origin_is_console``).
        """
        risk = RiskClass.NONE
        if request.element_name:
            c = request.context
            risk = _risk_of(
                request.element_name,
                request.element_role,
                c.dialog_title,
                c.form_name,
                c.heading,
                c.description,
                c.visible_text,
            )
        return {
            "target": request.target,
            "url": request.url,
            "origin": origin,
            "path": path,
            "element_role": request.element_role,
            "element_name": request.element_name,
            "element_name_lower": fold(request.element_name),
            "password_field": request.password_field,
            "window_class": request.window_class,
            "window_title": request.window_title,
            "origin_is_console": console,
            "dialog_title": request.context.dialog_title,
            "form_name": request.context.form_name,
            "heading": request.context.heading,
            "description": request.context.description,
            "document_load": request.document_load,
            "destructive": risk is RiskClass.DESTRUCTIVE,
            "risk": risk.value,
        }

    def evaluate(
        self,
        request: CheckInput,
        origin: str,
        grant: GrantInfo | None = None,
        *,
        base: dict[str, Any] | None = None,
    ) -> PolicyResult:
        """Evaluate the forbid rules for one action under ``grant`` (None: no grant).

        ``origin`` is that of ``request.url``; ``base`` is :meth:`base_context` when the
        caller already built it. A forbid that fails to evaluate counts as firing (fail
        closed), never as an approval.
        """
        if base is None:
            base = self.base_context(request, origin, url_path(request.url))
        if grant is not None:
            context = {
                **base,
                "has_grant": True,
                "grant_verbs": grant.verbs,  # JSON arrays, as lists would be
                "grant_origins": grant.origins,
                "origin_granted": bool(origin) and origin in grant.origins,
                "grant_allows_password": grant.allow_password_input,
                "grant_single_use": grant.single_use,
                "grant_task": grant.task_id,
            }
        else:
            context = {**base, "has_grant": False, **_NO_GRANT}
        key = self._index[request.verb].candidates(request.principal, context, request.verb)
        self.last_evaluated = len(key)
        if not key:
            return _NOTHING_FIRED  # no policy can fire: nothing to ask Cedar
        policy_set, attrs = self._policy_set(key)
        if attrs is not None:  # only what the policies read (Cedar parses all it is sent)
            context = {name: context[name] for name in attrs if name in context}
        result = cedarpy.is_authorized(
            {
                "principal": {"type": "Agent", "id": request.principal},
                "action": {"type": "Action", "id": request.verb},
                "resource": {
                    "type": "Element",
                    "id": f"{request.element_role}:{request.element_name}",
                },
                "context": json.dumps(context),
            },
            policy_set,
            self._entities,
        )
        diagnostics = result.diagnostics
        names: dict[str, str] = diagnostics.id_annotations_by_reason
        if diagnostics.errors:
            failed = [names.get(ref, ref) for e in diagnostics.errors for ref in _POLICY_REF.findall(e)]
            return PolicyResult(
                True,
                tuple(dict.fromkeys(failed)) or ("cedar-evaluation-error",),
                "a policy failed to evaluate: " + "; ".join(diagnostics.errors),
            )
        if result.allowed:
            return _NOTHING_FIRED
        ids = tuple(names.get(r, r) for r in diagnostics.reasons)
        infos = [self._by_id.get(i) for i in ids]
        approval_only = bool(infos) and all(i is not None and i.approval for i in infos)
        timeouts = [i.approval_timeout_ms for i in infos if i is not None and i.approval_timeout_ms]
        if approval_only:
            message = f"approval required by policy {', '.join(ids)}"
        else:
            message = f"forbidden by policy {', '.join(ids)}"
        return PolicyResult(True, ids, message, approval_only, min(timeouts) if timeouts else 0)


@functools.lru_cache(maxsize=4096)
def _risk_of(*texts: str) -> RiskClass:
    """:func:`classify` of the element these :class:`RiskInput` texts describe, kept by the
    texts themselves: a plain tuple key is hashed and compared without Python calls."""
    return classify(RiskInput(*texts))


_NOTHING_FIRED = PolicyResult()  # frozen: one for every evaluation where no forbid fired

_NO_GRANT: dict[str, Any] = {
    "grant_verbs": [],
    "grant_origins": [],
    "origin_granted": False,
    "grant_allows_password": False,
    "grant_single_use": False,
    "grant_task": "",
}
