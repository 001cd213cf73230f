"""The decision log: inputs redacted, caller and agent, explain, listing (RPC, CLI, file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handrail.authz import AuthzRpcError, _cli
from handrail.authz._explain import parse_since, redact_fields, redact_url
from tests.authz.conftest import Sidecar

TARGET = "browser:1"
ORIGIN = "https://shop.test"


def _setup(s: Sidecar) -> tuple[int, str]:
    epoch = s.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    grant = s.client("op").grant("agent-a", TARGET, ["submit"], [ORIGIN], path_globs=["/account*"])
    return epoch, grant.grant_id


def test_record_carries_inputs_caller_agent_and_lease(sidecar: Sidecar) -> None:
    epoch, grant_id = _setup(sidecar)
    d = sidecar.client("exe").check(
        "agent-a",
        TARGET,
        epoch,
        "submit",
        url=ORIGIN + "/account?access_token=s3cr3t&tab=2",
        element_role="button",
        element_name="Pause plan",
        action_id="act-9",
        fingerprint="fp-9",
        observation_id="obs-9",
    )
    assert d.allow
    record, text = sidecar.client("op").explain_decision(d.decision_id)
    r = record.request
    assert record.caller == "exe" and r.principal == "agent-a"  # both the caller and the agent
    assert "s3cr3t" not in r.url and "tab=2" in r.url
    assert (r.action_id, r.fingerprint, r.observation_id) == ("act-9", "fp-9", "obs-9")
    assert record.lease is not None and record.lease.holder == "agent-a"
    standing = {g.grant_id for g in sidecar.client("op").list_grants("agent-a")} - {grant_id}
    assert set(record.grants_considered) - standing == {grant_id}
    assert record.decision == d
    assert "caller exe asked for agent agent-a" in text
    assert f"{grant_id} (" in text and "covers it and was active ← decided on" in text
    assert "s3cr3t" not in text


def test_explain_says_why_each_grant_did_not_match(sidecar: Sidecar) -> None:
    epoch, grant_id = _setup(sidecar)
    sidecar.client("op").grant("agent-a", TARGET, ["input"], [ORIGIN])
    d = sidecar.client("exe").check("agent-a", TARGET, epoch, "submit", url=ORIGIN + "/cart")
    assert d.reason == "OUT_OF_SCOPE"
    _, text = sidecar.client("op").explain_decision(d.decision_id)
    assert "path '/cart' matches none of /account*" in text
    assert "it does not grant submit (only input)" in text
    assert "not evaluated (the lease or the grants decided first)" in text
    sidecar.client("op").revoke(grant_id)
    d = sidecar.client("exe").check("agent-a", TARGET, epoch, "submit", url=ORIGIN + "/account")
    _, text = sidecar.client("op").explain_decision(d.decision_id)
    assert "GRANT_REVOKED" in text and "covers it but was revoked" in text


def test_explain_names_the_policy_and_its_file(sidecar: Sidecar) -> None:
    epoch, _ = _setup(sidecar)
    d = sidecar.client("exe").check(
        "agent-a", TARGET, epoch, "submit", url=ORIGIN + "/account", element_name="Delete account"
    )
    _, text = sidecar.client("op").explain_decision(d.decision_id)
    assert "fired: destructive-needs-delete-grant (" in text and "default.cedar:" in text


def test_list_decisions_filters(sidecar: Sidecar) -> None:
    epoch, _ = _setup(sidecar)
    exe = sidecar.client("exe")
    first = exe.check("agent-a", TARGET, epoch, "submit", url=ORIGIN + "/account")
    sidecar.clock.advance(60_000)
    exe.check("agent-a", TARGET, epoch + 1, "submit", url=ORIGIN + "/account")
    exe.check("agent-a", "browser:2", 0, "submit")
    op = sidecar.client("op")
    assert [r.decision.reason for r in op.list_decisions()] == ["NO_LEASE", "STALE_EPOCH", "ALLOW"]
    assert [r.decision_id for r in op.list_decisions(reason="ALLOW")] == [first.decision_id]
    assert len(op.list_decisions(since_ms=sidecar.clock.now - 1_000)) == 2
    assert len(op.list_decisions(target=TARGET, limit=1)) == 1
    assert op.list_decisions(principal="agent-b") == []
    for who in ("agent-a",):
        with pytest.raises(AuthzRpcError) as err:
            sidecar.client(who).list_decisions()
        assert err.value.code_name == "PERMISSION_DENIED"
    with pytest.raises(AuthzRpcError) as err:
        op.explain_decision("nope")
    assert err.value.code_name == "NOT_FOUND"


@pytest.mark.sqlite_only  # reads (or locks) the SQLite file of --data-dir
def test_cli_explain_and_decisions(sidecar: Sidecar, capsys: pytest.CaptureFixture[str]) -> None:
    epoch, _ = _setup(sidecar)
    d = sidecar.client("exe").check("agent-a", TARGET, epoch, "submit", url=ORIGIN + "/account")
    remote = ["--authz", sidecar.address, "--token", sidecar.tokens["op"]]
    assert _cli.main(["authz", "explain", d.decision_id, *remote]) == 0
    out = capsys.readouterr().out
    assert f"decision {d.decision_id}" in out and "result: ALLOW" in out
    assert _cli.main(["authz", "explain", d.decision_id, "--data-dir", str(sidecar.data_dir)]) == 0
    assert "result: ALLOW" in capsys.readouterr().out
    assert _cli.main(["authz", "decisions", "--principal", "agent-a", "--since", "10m", *remote]) == 0
    out = capsys.readouterr().out
    assert d.decision_id in out and "ALLOW" in out and "by exe" in out
    local = ["--data-dir", str(sidecar.data_dir)]
    assert _cli.main(["authz", "decisions", "--reason", "policy_forbid", *local]) == 0
    assert capsys.readouterr().out.strip() == "no decisions"
    assert _cli.main(["authz", "decisions", "--since", "yesterday-ish", *remote]) == 1
    assert "neither a duration" in capsys.readouterr().err


def test_redaction_and_since() -> None:
    assert redact_url("https://u:pw@h.test/p?password=x&q=1#token=y") == (
        "https://h.test/p?password=%5BREDACTED%5D&q=1#token=%5BREDACTED%5D"
    )
    assert redact_url("https://h.test/p?q=1&r=2") == "https://h.test/p?q=1&r=2"
    assert redact_fields({"api_key": "k", "note": "n", "password_field": True}) == {
        "api_key": "[REDACTED]",
        "note": "n",
        "password_field": True,
    }
    assert parse_since("10m", 1_000_000) == 400_000
    assert parse_since("1970-01-01T00:00:01Z", 0) == 1_000


def test_principal_list_cli_still_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["authz", "principal", "add", "x", "--role", "admin", "--data-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert _cli.main(["authz", "policies"]) == 0
    out = capsys.readouterr().out
    assert "navigate-only-to-granted-origins" in out and "5 policies, valid" in out
