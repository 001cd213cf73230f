"""Grants as real scopes, over gRPC: resource patterns, lifetimes, the shipped defaults."""

from __future__ import annotations

import pytest

from handrail.authz import AuthzRpcError
from tests.authz.conftest import Sidecar, granted

TARGET = "browser:1"
ORIGIN = "http://127.0.0.1:8000"


def _lease(s: Sidecar, target: str = TARGET) -> int:
    return s.client("exe").acquire(target, holder="agent-a", ttl_ms=3_600_000).epoch


def _check(s: Sidecar, epoch: int, verb: str = "submit", **kw: object):  # type: ignore[no-untyped-def]
    kw.setdefault("url", ORIGIN + "/account")
    target = kw.pop("target", TARGET)
    return s.client("exe").check("agent-a", target, epoch, verb, **kw)  # type: ignore[arg-type]


def test_resource_patterns(sidecar: Sidecar) -> None:
    epoch = _lease(sidecar)
    sidecar.client("op").grant(
        "agent-a",
        TARGET,
        ["submit"],
        [ORIGIN],
        path_globs=["/account/*", "/account"],
        role_patterns=["button"],
        name_patterns=["Pause*", "Turn off *"],
    )
    ok = {"element_role": "button", "element_name": "Pause plan"}
    assert _check(sidecar, epoch, **ok).allow
    assert _check(sidecar, epoch, url=ORIGIN + "/account/plan", **ok).allow
    assert _check(sidecar, epoch, element_role="BUTTON", element_name="turn off renewal").allow
    for bad in (
        {"url": ORIGIN + "/cart", **ok},
        {"element_role": "link", "element_name": "Pause plan"},
        {"element_role": "button", "element_name": "Upgrade"},
    ):
        d = _check(sidecar, epoch, **bad)
        assert d.reason == "OUT_OF_SCOPE", bad


def test_desktop_window_patterns(sidecar: Sidecar) -> None:
    epoch = _lease(sidecar, "desktop:1")
    sidecar.client("op").grant(
        "agent-a",
        "desktop:1",
        ["input"],
        [],
        window_class_patterns=["gedit"],
        window_title_patterns=["*.txt*"],
    )
    win = {"target": "desktop:1", "url": ""}
    assert _check(sidecar, epoch, "input", window_class="gedit", window_title="a.txt", **win).allow
    d = _check(sidecar, epoch, "input", window_class="xterm", window_title="a.txt", **win)
    assert d.reason == "OUT_OF_SCOPE"
    d = _check(sidecar, epoch, "input", window_class="gedit", window_title="secrets", **win)
    assert d.reason == "OUT_OF_SCOPE"


def test_target_pattern(sidecar: Sidecar) -> None:
    epoch = _lease(sidecar, "browser:7")
    sidecar.client("op").grant("agent-a", "browser:*", ["submit"], [ORIGIN])
    assert _check(sidecar, epoch, target="browser:7").allow
    other = sidecar.client("exe").acquire("desktop:7", holder="agent-a").epoch
    assert _check(sidecar, other, target="desktop:7").reason == "OUT_OF_SCOPE"


def test_password_field_needs_an_explicit_grant(sidecar: Sidecar) -> None:
    epoch = _lease(sidecar)
    op = sidecar.client("op")
    plain = op.grant("agent-a", TARGET, ["input"], [ORIGIN])
    d = _check(sidecar, epoch, "input", element_role="textbox", password_field=True)
    assert d.reason == "POLICY_FORBID" and d.policies == ("password-needs-explicit-grant",)
    assert _check(sidecar, epoch, "input", element_role="textbox").allow
    op.revoke(plain.grant_id)
    allowed = op.grant("agent-a", TARGET, ["input"], [ORIGIN], allow_password_input=True)
    d = _check(sidecar, epoch, "input", element_role="textbox", password_field=True)
    assert d.allow and d.grant_id == allowed.grant_id


@pytest.mark.parametrize(
    "name",
    ["Delete account", "Remove", "Close account", "Cancel subscription permanently"],
)
def test_destructive_elements_need_a_delete_grant(sidecar: Sidecar, name: str) -> None:
    epoch = _lease(sidecar)
    op = sidecar.client("op")
    op.grant("agent-a", TARGET, ["submit"], [ORIGIN])
    d = _check(sidecar, epoch, element_role="button", element_name=name)
    assert d.reason == "POLICY_FORBID" and d.policies == ("destructive-needs-delete-grant",)
    destructive = op.grant("agent-a", TARGET, ["submit", "delete"], [ORIGIN], single_use=True)
    # an ordinary element does not spend the single-use destructive grant
    assert _check(sidecar, epoch, element_role="button", element_name="Save").grant_id != (destructive.grant_id)
    d = _check(sidecar, epoch, element_role="button", element_name=name)
    assert d.allow and d.grant_id == destructive.grant_id and d.grant_consumed
    assert _check(sidecar, epoch, element_role="button", element_name=name).reason == ("POLICY_FORBID")


def test_navigation_only_to_granted_origins(sidecar: Sidecar) -> None:
    epoch = _lease(sidecar)
    op = sidecar.client("op")
    anywhere = op.grant("agent-a", TARGET, ["navigate"], [])
    d = _check(sidecar, epoch, "navigate", url="https://elsewhere.test/")
    assert d.reason == "POLICY_FORBID" and d.policies == ("navigate-only-to-granted-origins",)
    op.revoke(anywhere.grant_id)
    op.grant("agent-a", TARGET, ["navigate"], [ORIGIN])
    assert _check(sidecar, epoch, "navigate", url=ORIGIN + "/x").allow
    # the revoked any-origin grant is the one that covered it
    assert _check(sidecar, epoch, "navigate", url="https://elsewhere.test/").reason == ("GRANT_REVOKED")


def test_single_use_then_exhausted(sidecar: Sidecar) -> None:
    epoch = _lease(sidecar)
    grant = sidecar.client("op").grant("agent-a", TARGET, ["submit"], [ORIGIN], single_use=True)
    first = _check(sidecar, epoch)
    assert first.allow and first.grant_consumed
    second = _check(sidecar, epoch)
    assert second.reason == "GRANT_EXHAUSTED" and second.grant_id == grant.grant_id
    (listed,) = granted(sidecar.client("op").list_grants("agent-a", include_inactive=True))
    assert listed.used_at_ms == sidecar.clock.now and listed.state(sidecar.clock.now) == ("exhausted")


def test_task_bound_grants_end_when_the_task_closes(sidecar: Sidecar) -> None:
    epoch = _lease(sidecar)
    op = sidecar.client("op")
    g1 = op.grant("agent-a", TARGET, ["submit"], [ORIGIN], task_id="task-7")
    g2 = op.grant("agent-a", TARGET, ["input"], [ORIGIN], task_id="task-7")
    op.grant("agent-a", TARGET, ["read"], [], task_id="task-8")
    assert _check(sidecar, epoch).allow
    closed = op.close_task("task-7")
    assert {g.grant_id for g in closed} == {g1.grant_id, g2.grant_id}
    d = _check(sidecar, epoch)
    assert d.reason == "GRANT_EXPIRED" and "task was closed" in d.message
    assert _check(sidecar, epoch, "read").allow
    assert op.close_task("task-7") == []
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("agent-a").close_task("task-8")
    assert err.value.code_name == "PERMISSION_DENIED"


def test_revocation_between_two_checks(sidecar: Sidecar) -> None:
    epoch = _lease(sidecar)
    grant = sidecar.client("op").grant("agent-a", TARGET, ["submit"], [ORIGIN])
    assert _check(sidecar, epoch).allow
    sidecar.client("op").revoke(grant.grant_id)
    assert _check(sidecar, epoch).reason == "GRANT_REVOKED"


def test_grant_round_trips_every_field(sidecar: Sidecar) -> None:
    g = sidecar.client("op").grant(
        "agent-a",
        "browser:*",
        ["submit", "purchase"],
        [ORIGIN],
        sidecar.clock.now + 60_000,
        "why",
        path_globs=["/a/*"],
        role_patterns=["button"],
        name_patterns=["Buy*"],
        window_class_patterns=["x"],
        window_title_patterns=["y"],
        allow_password_input=True,
        single_use=True,
        task_id="t1",
        require_approval_verbs=["purchase"],
        approval_timeout_ms=30_000,
    )
    (listed,) = granted(sidecar.client("op").list_grants("agent-a"))
    assert listed == g
    assert g.require_approval_verbs == ("purchase",) and g.approval_timeout_ms == 30_000
