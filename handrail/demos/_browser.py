"""``handrail demo``: the guarded loop end to end, for a newcomer.

It starts the authz sidecar and the executor as separate processes on loopback, serves
the subscription fixture, grants a scripted agent a scope and drives it over gRPC through
a refusal for scope, a stale ref after a re-render, an operator's takeover and hand-back,
and the cancellation of the renewal. It prints the ledger's timeline and the fixture's
final state, stops what it started, and exits non-zero if any step misbehaved.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from handrail.authz import AuthzClient
from handrail.executor import ExecutorClient, Outcome
from handrail.scenarios import SubscriptionApp, start_authz, start_executor

from ._common import AGENT, EXECUTOR, OPERATOR, Steps, make_principals

__all__ = ["TARGET", "run_demo"]

TARGET = "browser:subscription-demo"


def run_demo(data_dir: Path, *, chromium: str | None = None, out: TextIO = sys.stdout) -> int:
    """Run the demo with its data in ``data_dir``; return 0 when every step behaved."""
    steps = Steps(out)
    tokens = make_principals(data_dir)

    with ExitStack() as stack:
        app = SubscriptionApp()
        base = app.start()
        stack.callback(app.stop)
        steps.say(f"fixture: subscription page at {base}/")
        authz_proc = start_authz(data_dir)
        stack.callback(authz_proc.stop)
        steps.say(f"authz sidecar: pid {authz_proc.proc.pid}, {authz_proc.address}")
        exec_proc = start_executor(data_dir, authz_proc.address, tokens[EXECUTOR], chromium=chromium)
        stack.callback(exec_proc.stop)
        steps.say(f"executor: pid {exec_proc.proc.pid}, {exec_proc.address}")

        operator = stack.enter_context(AuthzClient(authz_proc.address, tokens[OPERATOR]))
        grant = operator.grant(
            AGENT, TARGET, ["navigate", "input", "submit"], [base], note="turn off the renewal of Pro Monthly"
        )
        steps.say(f"operator {OPERATOR} granted {AGENT}: input, submit on {base} ({grant.grant_id})")

        agent = stack.enter_context(ExecutorClient(exec_proc.address, tokens[AGENT]))
        session = agent.open_session(target=TARGET, start_url=base + "/")
        obs = session.observe()
        steps.say(f"agent {AGENT} opened {session.session_id} on {TARGET} (lease epoch {obs.lease_epoch})")

        def refused(what: str, reason: str, call: Callable[[], Any]) -> None:
            result = call().result
            steps.expect(
                what,
                result.outcome is Outcome.REFUSED and result.reason == reason and not result.execution_started,
                f"{result.outcome.value} {result.reason}: {result.message}",
            )

        steps.say("\n1. out of scope")
        refused(
            "navigating to an origin the grant does not name is refused",
            "OUT_OF_SCOPE",
            lambda: session.navigate("http://127.0.0.1:9/elsewhere"),
        )
        refused(
            "clicking 'Delete account' is refused by a standing Cedar policy",
            "POLICY_FORBID",
            lambda: session.click(session.find("button", "Delete account")),
        )
        steps.expect(
            "the merchant saw no deletion",
            app.state()["requests"].get("POST /delete-account", 0) == 0,
        )

        steps.say("\n2. a stale ref after the page re-renders")
        obs = session.observe()
        ref = session.find("button", "Turn off auto-renew", obs)
        app.push_rerender()
        steps.expect("the page re-rendered its buttons", app.wait_rerendered(1, timeout=10))
        refused(
            "the ref of the re-rendered button is refused",
            "STALE_REF",
            lambda: session.click(ref, observation=obs),
        )
        steps.expect("nothing reached the merchant", _posts(app.state()) == 0)

        steps.say("\n3. an operator takes over")
        obs = session.observe()
        lease = operator.take_over(TARGET, note="checking the account myself")
        steps.say(f"  operator {OPERATOR} took over {TARGET}: epoch {obs.lease_epoch} -> {lease.epoch}")
        refused(
            "the agent's next write is refused while a person holds the lease",
            "HELD_BY_HUMAN",
            lambda: session.click(session.find("button", "Turn off auto-renew", obs), observation=obs),
        )
        lease = operator.hand_back(TARGET, lease.epoch, next_holder=AGENT)
        steps.say(f"  operator handed {TARGET} back to {AGENT} (epoch {lease.epoch})")
        steps.expect("nothing reached the merchant", _posts(app.state()) == 0)

        steps.say("\n4. the cancellation of the renewal")
        obs = session.observe()
        steps.say(f"  agent observed again under lease epoch {obs.lease_epoch}")
        r1 = session.click(
            session.find("button", "Turn off auto-renew"), expect_text="No thanks, turn off renewal"
        ).result
        steps.expect(
            "'Turn off auto-renew' opens the retention offer",
            r1.outcome is Outcome.DONE and r1.evidence.value == "VERIFIED",
            f"{r1.outcome.value}, evidence {r1.evidence.value}: {r1.message}",
        )
        r2 = session.click(
            session.find("button", "No thanks, turn off renewal"), expect_text="Auto-renew is off"
        ).result
        steps.expect(
            "'No thanks, turn off renewal' turns the renewal off",
            r2.outcome is Outcome.DONE and r2.evidence.value == "VERIFIED",
            f"{r2.outcome.value}, evidence {r2.evidence.value}: {r2.message}",
        )
        session.close()
        stack.pop_all().close()  # stop the servers before reading the ledger

    state = app.state()
    steps.say("\nfixture's final state:")
    steps.say(
        f"  plan {state['plan']!r}, auto_renew {state['auto_renew']}, "
        f"paused {state['paused']}, discount_accepted {state['discount_accepted']}, "
        f"account_deleted {state['account_deleted']}"
    )
    steps.say(f"  requests: {state['requests']}")
    steps.expect(
        "the renewal is off and the plan kept",
        state["auto_renew"] is False and state["plan"] == "Pro Monthly",
    )
    steps.expect(
        "the offer was declined and the account kept",
        not state["discount_accepted"] and not state["account_deleted"],
    )
    steps.expect(
        "exactly one cancellation request reached the merchant",
        state["requests"].get("POST /cancel-renewal", 0) == 1 and _posts(state) == 1,
    )

    return steps.finish(data_dir / "ledger.sqlite", "demo")


def _posts(state: dict[str, Any]) -> int:
    return sum(
        n for path, n in state["requests"].items() if path.startswith("POST /") and not path.startswith("POST /__")
    )
