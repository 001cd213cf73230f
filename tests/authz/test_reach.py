"""What agents never reach: the console's origins in every spelling; a person's own input.

Pure rules (``authz._reach``) and the authorizer over a real SQLite store, no server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from handrail.authz import Authorizer, InvalidArgumentError, PermissionDeniedError, PolicyEngine, SqliteStore
from handrail.authz._models import CheckInput, GrantInfo, Principal
from handrail.authz._reach import ConsoleOrigins


@pytest.mark.parametrize(
    ("url", "inside"),
    [
        ("http://127.0.0.1:7710/approvals", True),
        ("http://localhost:7710/", True),
        ("http://app.localhost:7710/", True),
        ("http://127.1:7710/", True),
        ("http://0x7f.0.0.1:7710/", True),
        ("http://2130706433:7710/", True),
        ("http://[::1]:7710/", True),
        ("http://[::ffff:127.0.0.1]:7710/", True),
        ("http://0.0.0.0:7710/", True),
        ("https://127.0.0.1:7710/", True),  # the same listener, whatever the scheme
        ("http://127.0.0.1:7711/", False),
        ("http://127.0.0.1/", False),
        ("http://shop.example:7710/", False),
        ("about:blank", False),
        ("", False),
    ],
)
def test_every_spelling_of_a_loopback_console_is_the_console(url: str, inside: bool) -> None:
    assert ConsoleOrigins.parse(["http://127.0.0.1:7710"]).contains(url) is inside


def test_a_bad_console_origin_is_named() -> None:
    with pytest.raises(InvalidArgumentError, match=r"console_origins\[1\]"):
        ConsoleOrigins.parse(["http://127.0.0.1:7710", "ftp://x"])


@pytest.fixture
def authorizer(tmp_path: Path) -> Authorizer:
    store = SqliteStore.in_dir(tmp_path)
    for name, role in (("ops-a", "operator"), ("ops-b", "operator"), ("agent-1", "agent"), ("exec-1", "executor")):
        store.add_principal(name, role)
    authorizer = Authorizer(store, PolicyEngine.load())
    authorizer.console_origins = ConsoleOrigins.parse(["http://127.0.0.1:7710"])
    return authorizer


OPS = Principal("ops-a", "operator")
BOB = Principal("ops-b", "operator")
AGENT = Principal("agent-1", "agent")
EXECUTOR = Principal("exec-1", "executor")


def _human(person: str, epoch: int) -> CheckInput:
    return CheckInput(person, "browser:t", epoch, "input", url="http://shop.test/")


def test_only_the_person_holding_the_lease_at_its_epoch_may_send_input(authorizer: Authorizer) -> None:
    a = authorizer
    assert a.check_human_input(OPS, _human("ops-a", 0)).reason == "NO_LEASE"  # nobody holds it
    a.grant(OPS, GrantInfo("", "agent-1", "browser:t", ("input",), ("http://shop.test",)))
    a.acquire(AGENT, "browser:t", "", 0)
    assert a.check_human_input(OPS, _human("ops-a", 1)).reason == "NO_LEASE"  # an agent holds it
    lease = a.take_over(OPS, "browser:t", 0, "")
    ok = a.check_human_input(OPS, _human("ops-a", lease.epoch))
    assert ok.allow and ok.decision_id
    assert a.check_human_input(OPS, _human("ops-a", lease.epoch - 1)).reason == "STALE_EPOCH"
    assert a.check_human_input(BOB, _human("ops-b", lease.epoch)).reason == "NO_LEASE"  # another person
    bob = a.take_over(BOB, "browser:t", 0, "")
    assert a.check_human_input(OPS, _human("ops-a", lease.epoch)).reason == "NO_LEASE"  # taken from them
    assert a.check_human_input(BOB, _human("ops-b", bob.epoch)).allow
    a.hand_back(BOB, "browser:t", bob.epoch, "")
    assert a.check_human_input(BOB, _human("ops-b", bob.epoch)).reason == "NO_LEASE"
    logged = a.store.get_decision(ok.decision_id)
    assert logged.caller == "ops-a" and logged.decision.allow


def test_nobody_sends_a_persons_input_but_that_person(authorizer: Authorizer) -> None:
    a = authorizer
    lease = a.take_over(OPS, "browser:t", 0, "")
    for caller in (AGENT, EXECUTOR):
        with pytest.raises(PermissionDeniedError):
            a.check_human_input(caller, _human("ops-a", lease.epoch))
    with pytest.raises(PermissionDeniedError):
        a.check_human_input(BOB, _human("ops-a", lease.epoch))


def test_no_grant_lets_an_agent_act_on_the_console(authorizer: Authorizer) -> None:
    a = authorizer
    a.grant(
        OPS,
        GrantInfo("", "agent-1", "browser:t", ("navigate", "submit"), ("http://127.0.0.1:7710", "http://127.1:7710")),
    )
    lease = a.acquire(AGENT, "browser:t", "", 0)
    for url, verb in (("http://127.0.0.1:7710/approvals", "navigate"), ("http://127.1:7710/x", "submit")):
        decision = a.check(AGENT, CheckInput("agent-1", "browser:t", lease.epoch, verb, url=url))
        assert (decision.allow, decision.reason) == (False, "POLICY_FORBID")
        assert decision.policies == ("agents-never-reach-the-console",)
