"""Standing rules in Cedar: loading, validating and evaluating the policy files.

Grants decide what is permitted; Cedar is consulted only for ``forbid`` rules. The engine
adds one internal permit-all policy, so a Cedar *Deny* means a ``forbid`` fired, and the
decision names the ``@id`` of each forbid that did.

Every ``*.cedar`` file of the policies directory is loaded, each policy must carry an
``@id("...")`` annotation, and all are validated against ``schema.cedarschema`` (the shipped
schema when the directory has none). cedarpy reports no source offsets, so the line of an
error is that of the statement it belongs to: files are split into statements at top-level
``;`` and each statement is parsed on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import cedarpy
from handrail.authz._core import CheckInput, PolicyResult
from handrail.authz._errors import PolicyError

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


def _check_file(path: Path, schema: cedarpy.Schema, seen: dict[str, str]) -> str:
    """Parse and validate one policy file; record its ``@id``s in ``seen``; return its text."""
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
                raise PolicyError(
                    str(path), stmt.line, f"@id {pid!r} is used twice (also at {seen.get(pid)})"
                )
            seen[pid] = where
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
    """

    def __init__(self, policy_set: cedarpy.PolicySet, policy_ids: tuple[str, ...]) -> None:
        self._policies = policy_set
        self._entities = cedarpy.Entities.from_json_str("[]")
        self.policy_ids = policy_ids
        """The ``@id`` of every loaded policy, in load order."""

    @classmethod
    def load(cls, directory: str | Path | None = None) -> PolicyEngine:
        """Load and validate every ``*.cedar`` file of ``directory`` (default: the shipped one).

        Raises:
            PolicyError: a file does not parse or validate, or a policy lacks an ``@id``;
                ``str(error)`` reads ``FILE:LINE: message``.
        """
        path = Path(directory) if directory is not None else DEFAULT_POLICIES_DIR
        if not path.is_dir():
            raise PolicyError(str(path), 1, "policies directory does not exist")
        schema = _load_schema(path)
        seen: dict[str, str] = {}
        texts = [_check_file(f, schema, seen) for f in sorted(path.glob("*.cedar"))]
        # Each file ends with ';' once parsed per statement, so plain concatenation is sound.
        policy_set = cedarpy.PolicySet.from_str("\n".join([*texts, _PERMIT_ALL]))
        return cls(policy_set, tuple(seen))

    def evaluate(self, request: CheckInput, origin: str) -> PolicyResult:
        """Evaluate the forbid rules for one action (``origin`` is that of ``request.url``).

        A forbid that fails to evaluate counts as firing (fail closed).
        """
        path = urlsplit(request.url).path if request.url else ""
        result = cedarpy.is_authorized(
            {
                "principal": {"type": "Agent", "id": request.principal},
                "action": {"type": "Action", "id": request.verb},
                "resource": {
                    "type": "Element",
                    "id": f"{request.element_role}:{request.element_name}",
                },
                "context": {
                    "url": request.url,
                    "origin": origin,
                    "path": path,
                    "element_role": request.element_role,
                    "element_name": request.element_name,
                    "password_field": request.password_field,
                    "window_class": request.window_class,
                    "window_title": request.window_title,
                },
            },
            self._policies,
            self._entities,
        )
        diagnostics = result.diagnostics
        names: dict[str, str] = diagnostics.id_annotations_by_reason
        if diagnostics.errors:
            failed = [
                names.get(ref, ref) for e in diagnostics.errors for ref in _POLICY_REF.findall(e)
            ]
            return PolicyResult(
                True,
                tuple(dict.fromkeys(failed)) or ("cedar-evaluation-error",),
                "a policy failed to evaluate: " + "; ".join(diagnostics.errors),
            )
        if result.allowed:
            return PolicyResult()
        ids = tuple(names.get(r, r) for r in diagnostics.reasons)
        return PolicyResult(True, ids, f"forbidden by policy {', '.join(ids)}")
