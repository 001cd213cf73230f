"""Reloading policies (RPC and SIGHUP) and shadow (dry-run) policies."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import pytest

from handrail.authz import AuthzClient, AuthzRpcError, PolicyEngine, SqliteStore
from handrail.scenarios import start_authz
from tests.authz.conftest import MakeSidecar, Sidecar, policies_dir

TARGET = "browser:1"
NO_UPLOADS = '@id("no-uploads")\nforbid (principal, action == Action::"upload", resource);\n'
NO_SAVE = '@id("no-save")\nforbid (principal, action, resource)\nwhen { context.element_name == "Save" };\n'
BROKEN = '@id("x")\nforbid (principal, action, resource)\n  when { context. };\n'


def _setup(s: Sidecar) -> int:
    epoch = s.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    s.client("op").grant("agent-a", TARGET, ["submit", "upload"], [])
    return epoch


def test_reload_applies_and_a_broken_set_keeps_the_old_one(make_sidecar: MakeSidecar, tmp_path: Path) -> None:
    policies = policies_dir(tmp_path)
    s = make_sidecar(policies_dir=policies)
    epoch = _setup(s)
    exe, op = s.client("exe"), s.client("op")
    assert exe.check("agent-a", TARGET, epoch, "upload").allow

    (policies / "extra.cedar").write_text(NO_UPLOADS)
    enforced, shadow = op.reload_policies()
    assert "no-uploads" in enforced and shadow == ()
    assert exe.check("agent-a", TARGET, epoch, "upload").policies == ("no-uploads",)

    (policies / "broken.cedar").write_text("// first line\n" + BROKEN)
    with pytest.raises(AuthzRpcError) as err:
        op.reload_policies()
    assert err.value.code_name == "FAILED_PRECONDITION"
    assert f"{policies / 'broken.cedar'}:2: " in err.value.details
    # the old set is still in force
    assert exe.check("agent-a", TARGET, epoch, "upload").policies == ("no-uploads",)
    with pytest.raises(AuthzRpcError) as err:
        s.client("agent-a").reload_policies()
    assert err.value.code_name == "PERMISSION_DENIED"


def test_shadow_policies_log_without_denying(
    make_sidecar: MakeSidecar, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shadow = policies_dir(tmp_path, "shadow", **{"try.cedar": NO_SAVE})
    s = make_sidecar(shadow_policies_dir=shadow)
    epoch = _setup(s)
    with caplog.at_level(logging.WARNING, logger="handrail.authz"):
        d = s.client("exe").check("agent-a", TARGET, epoch, "submit", element_role="button", element_name="Save")
    assert d.allow and d.shadow_policies == ("no-save",)
    assert any("would deny" in r.getMessage() and d.decision_id in r.getMessage() for r in caplog.records)
    other = s.client("exe").check("agent-a", TARGET, epoch, "submit", element_name="Open")
    assert other.allow and other.shadow_policies == ()
    record, text = s.client("op").explain_decision(d.decision_id)
    assert record.decision.shadow_policies == ("no-save",) and "would deny: no-save" in text
    # a reload re-reads the shadow set too
    (shadow / "try.cedar").write_text(NO_UPLOADS)
    shadow_ids = s.client("op").reload_policies()[1]
    assert "no-uploads" in shadow_ids and "no-save" not in shadow_ids
    again = s.client("exe").check("agent-a", TARGET, epoch, "submit", element_name="Save")
    assert again.shadow_policies == ()


def test_engine_indexes_policies_by_verb(tmp_path: Path) -> None:
    engine = PolicyEngine.load(policies_dir(tmp_path, **{"x.cedar": NO_UPLOADS + NO_SAVE}))
    assert engine.size_for("upload") == engine.size_for("submit") + 1
    info = engine.info("no-uploads")
    assert info is not None and info.verbs == frozenset({"upload"}) and info.line == 1


@pytest.mark.slow
def test_sighup_reloads_and_a_broken_file_is_logged(tmp_path: Path) -> None:
    policies = policies_dir(tmp_path)
    with SqliteStore.in_dir(tmp_path / "data") as store:
        op_token = store.add_principal("op", "operator")
    server = start_authz(tmp_path / "data", policies=policies)
    try:
        with AuthzClient(server.address, op_token) as op:
            (policies / "extra.cedar").write_text(NO_UPLOADS)
            os.kill(server.proc.pid, signal.SIGHUP)
            _wait_for(server.output, "policies reloaded (SIGHUP): 6 enforced")
            (policies / "broken.cedar").write_text(BROKEN)
            os.kill(server.proc.pid, signal.SIGHUP)
            _wait_for(server.output, f"{policies / 'broken.cedar'}:1: ")
            assert op.who_am_i() == ("op", "operator")
    finally:
        assert server.stop() == 0


def _wait_for(lines: list[str], text: str) -> None:
    deadline = time.monotonic() + 10
    while not any(text in line for line in lines):
        assert time.monotonic() < deadline, f"{text!r} not in:\n" + "\n".join(lines)
        time.sleep(0.02)
