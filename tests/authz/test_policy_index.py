"""The policy index hands Cedar fewer policies (and less context) but never changes its answer."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import cedarpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handrail.authz import GrantInfo, PolicyEngine
from handrail.authz._core import VERBS, CheckInput, PolicyResult
from handrail.authz._policies import _PERMIT_ALL, DEFAULT_POLICIES_DIR

ORIGINS = ["https://a.test", "https://b.test", ""]
NAMES = ["Save", "Delete account", "D\u0435lete account", "Remove item", "forbidden 3", "Pay"]
AGENTS = ["agent-1", "agent-2"]

conditions = st.sampled_from(
    [
        'context.origin == "https://a.test"',
        '"https://b.test" == context.origin',
        'context.element_name_lower like "*delete*"',
        'context.element_name like "Pay*"',
        "context.password_field",
        "context.grant_allows_password",
        'action == Action::"submit"',
        'action != Action::"read"',
        '(context.element_name like "Save" || context.element_name like "*item")',
        '(context.origin == "https://a.test" || context.password_field)',
        'context.path like "/admin/*"',
        'context.grant_verbs.contains("delete")',
        "context.grant_origins.contains(context.origin)",
        "context has grant_task",
        "true",
    ]
)
scopes = st.sampled_from(
    ["principal, action, resource", 'principal == Agent::"agent-1", action, resource']
    + [f'principal, action == Action::"{v}", resource' for v in ("submit", "navigate", "input")]
    + ['principal, action in [Action::"submit", Action::"purchase"], resource']
)


@st.composite
def policy_text(draw: st.DrawFn, i: int) -> str:
    scope = draw(scopes)
    clause = st.tuples(st.sampled_from(["when", "unless"]), st.lists(conditions, min_size=1, max_size=3))
    first = draw(st.lists(conditions, min_size=1, max_size=3))
    clauses = [("when", first)] if draw(st.booleans()) else []
    clauses += draw(st.lists(clause, min_size=0 if clauses else 1, max_size=3))
    body = " ".join(f"{kind} {{ {' && '.join(c)} }}" for kind, c in clauses)
    return f'@id("p{i}")\nforbid ({scope})\n{body};\n'


@st.composite
def policy_sets(draw: st.DrawFn) -> list[str]:
    n = draw(st.integers(min_value=1, max_value=8))
    return [draw(policy_text(i)) for i in range(n)]


requests = st.builds(
    lambda agent, verb, origin, name, pw, path: CheckInput(
        agent,
        "browser:1",
        1,
        verb,
        url=f"{origin}{path}" if origin else "",
        element_role="button",
        element_name=name,
        password_field=pw,
    ),
    st.sampled_from(AGENTS),
    st.sampled_from(VERBS),
    st.sampled_from(ORIGINS),
    st.sampled_from(NAMES),
    st.booleans(),
    st.sampled_from(["/", "/admin/x", "/account"]),
)
grants = st.builds(
    lambda verbs, pw: GrantInfo(
        "g", "agent-1", "browser:1", tuple(verbs), ("https://a.test",), allow_password_input=pw
    ),
    st.lists(st.sampled_from(VERBS), min_size=1, max_size=3, unique=True),
    st.booleans(),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=policy_sets(), request=requests, grant=grants)
def test_index_agrees_with_cedar_on_the_whole_set(texts: list[str], request: CheckInput, grant: GrantInfo) -> None:
    directory = Path(tempfile.mkdtemp(prefix="index-prop-"))
    try:
        shutil.copy(DEFAULT_POLICIES_DIR / "schema.cedarschema", directory)
        (directory / "p.cedar").write_text("".join(texts))
        engine = PolicyEngine.load(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    origin = request.url.rsplit("/", 1)[0] if request.url else ""
    if request.url:
        origin = request.url[: request.url.index("/", len("https://"))]
    indexed = engine.evaluate(request, origin, grant)
    # Cedar over every policy, no index
    context = PolicyEngine.base_context(request, origin, request.url[len(origin) :] or ("/" if request.url else ""))
    context.update(
        has_grant=True,
        grant_verbs=list(grant.verbs),
        grant_origins=list(grant.origins),
        origin_granted=bool(origin) and origin in grant.origins,
        grant_allows_password=grant.allow_password_input,
        grant_single_use=False,
        grant_task="",
    )
    whole = cedarpy.PolicySet.from_str("".join(texts) + _PERMIT_ALL)
    result = cedarpy.is_authorized(
        {
            "principal": {"type": "Agent", "id": request.principal},
            "action": {"type": "Action", "id": request.verb},
            "resource": {"type": "Element", "id": f"button:{request.element_name}"},
            "context": json.dumps(context),
        },
        whole,
        cedarpy.Entities.from_json_str("[]"),
    )
    fired = set(result.diagnostics.id_annotations_by_reason.get(r, r) for r in result.diagnostics.reasons)
    assert indexed.forbidden == (not result.allowed)
    if indexed.forbidden:
        assert set(indexed.policies) == fired
    assert engine.last_evaluated <= len(texts)


def test_context_attrs_are_those_a_policy_reads() -> None:
    from handrail.authz._policy_index import context_attrs

    text = (
        '@id("a")\nforbid (principal, action, resource)\nwhen { context.password_field }\n'
        "unless { context.grant_verbs.contains(context.origin) };\n"
        '@id("b")\nforbid (principal, action, resource)\nwhen { context has window_title };\n'
        '@id("c")\nforbid (principal, action, resource)\nwhen { context == {"origin": ""} };\n'
        '@id("d")\nforbid (principal, action, resource);\n'
    )
    policies = cedarpy.PolicySet.from_str(text).to_pst().static_policies.values()
    found = {p.annotations["id"]: context_attrs(p) for p in policies}
    assert found == {
        "a": {"password_field", "grant_verbs", "origin"},
        "b": {"window_title"},
        "c": None,  # the record as a whole: Cedar gets the whole context
        "d": frozenset(),
    }


def test_a_navigation_to_a_granted_origin_does_not_reach_cedar() -> None:
    engine = PolicyEngine.load()  # the shipped rules: navigation only to granted origins
    grant = GrantInfo("g", "agent-1", "browser:1", ("navigate",), ("https://a.test",))
    to_granted = CheckInput("agent-1", "browser:1", 1, "navigate", url="https://a.test/x")
    assert engine.evaluate(to_granted, "https://a.test", grant) == PolicyResult()
    assert engine.last_evaluated == 0
    elsewhere = CheckInput("agent-1", "browser:1", 1, "navigate", url="https://b.test/x")
    refused = engine.evaluate(elsewhere, "https://b.test", grant)
    assert refused.forbidden and refused.policies == ("navigate-only-to-granted-origins",)
    assert engine.last_evaluated == 1
