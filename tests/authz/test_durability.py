"""Nothing acknowledged is lost: restart after ``kill -9`` under load."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from handrail.authz import AuthzClient, AuthzError, GrantInfo, SqliteStore
from handrail.scenarios import start_authz

TARGET = "browser:d"


@pytest.mark.slow
def test_kill_9_under_load_loses_nothing_acknowledged(tmp_path: Path) -> None:
    with SqliteStore.in_dir(tmp_path) as store:
        op_token = store.add_principal("op", "operator")
        exe_token = store.add_principal("exe", "executor")
        store.add_principal("agent-a", "agent")
        # Only a grant holder may take the lease: a standing read grant lets it.
        store.add_grant(GrantInfo("", "agent-a", TARGET, ("read",)), "op")
    server = start_authz(tmp_path)
    grants: dict[str, bool] = {}  # acknowledged grant id -> acknowledged revoked
    decisions: dict[str, bool] = {}  # acknowledged decision id -> allow
    consumed: set[str] = set()
    leases: list[int] = []
    stop = threading.Event()

    def granting() -> None:
        with AuthzClient(server.address, op_token, timeout_s=2) as op:
            i = 0
            while not stop.is_set():
                try:
                    g = op.grant("agent-a", TARGET, ["submit"], [], single_use=True, note=str(i))
                    grants[g.grant_id] = False
                    if i % 3 == 0:
                        op.revoke(g.grant_id)
                        grants[g.grant_id] = True
                except AuthzError:
                    return  # the sidecar is gone
                i += 1

    def checking() -> None:
        with AuthzClient(server.address, exe_token, timeout_s=2) as exe:
            try:
                lease = exe.acquire(TARGET, holder="agent-a", ttl_ms=3_600_000)
                leases.append(lease.epoch)
                while not stop.is_set():
                    d = exe.check("agent-a", TARGET, lease.epoch, "submit")
                    decisions[d.decision_id] = d.allow
                    if d.grant_consumed:
                        consumed.add(d.grant_id)
            except AuthzError:
                return

    threads = [threading.Thread(target=f) for f in (granting, checking, checking)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    server.kill()  # kill -9 while the load runs
    stop.set()
    for t in threads:
        t.join(10)
    assert len(grants) > 10 and len(decisions) > 10 and consumed

    again = start_authz(tmp_path)  # restarts on the same files
    try:
        with AuthzClient(again.address, op_token) as op:
            stored = {g.grant_id: g for g in op.list_grants(include_inactive=True)}
            assert set(grants) <= set(stored)
            for grant_id, revoked in grants.items():
                assert stored[grant_id].revoked or not revoked
            for grant_id in consumed:
                assert stored[grant_id].used_at_ms > 0
        with AuthzClient(again.address, exe_token) as exe:
            assert exe.get_lease(TARGET).epoch >= max(leases)
        with SqliteStore.in_dir(tmp_path) as store:  # the log, read from the file
            for decision_id, allow in decisions.items():
                assert store.get_decision(decision_id).decision.allow == allow
    finally:
        again.stop()
