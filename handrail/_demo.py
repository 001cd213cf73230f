"""``handrail demo``: the guarded loop end to end, for a newcomer.

It starts the authz sidecar and the executor as separate processes on loopback, serves
the subscription fixture, grants a scripted agent a scope and drives it over gRPC through
a refusal for scope, a stale ref after a re-render, an operator's takeover and hand-back,
and the cancellation of the renewal. It prints the ledger's timeline and the fixture's
final state, stops what it started, and exits non-zero if any step misbehaved.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

TARGET = "browser:subscription-demo"
AGENT = "demo-agent"
OPERATOR = "ops-alice"
EXECUTOR = "executor-1"


def register(sub: Any) -> None:
    """Add ``handrail demo`` to the top-level parser."""
    p = sub.add_parser("demo", help="run the guarded loop end to end on a local fixture app")
    p.add_argument("--chromium", default=None, help="Chromium executable (env HANDRAIL_CHROMIUM)")
    p.add_argument("--data-dir", type=Path, default=None, help="keep the data here (default: a temp dir)")
    p.add_argument(
        "--desktop",
        action="store_true",
        help="the X11 desktop loop instead: Xvfb, a window manager and a small Tk app",
    )
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    def run(data_dir: Path) -> int:
        if args.desktop:
            from handrail._desktop_demo import run_desktop_demo

            return run_desktop_demo(data_dir)
        return run_demo(data_dir, chromium=args.chromium)

    if args.data_dir is not None:
        return run(args.data_dir)
    with tempfile.TemporaryDirectory(prefix="handrail-demo-") as tmp:
        return run(Path(tmp))


class Steps:
    """Prints each step and remembers the ones that did not behave as stated."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.failures: list[str] = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def expect(self, what: str, ok: bool, detail: str = "") -> None:
        mark = "ok  " if ok else "FAIL"
        self.say(f"  [{mark}] {what}" + (f" — {detail}" if detail else ""))
        if not ok:
            self.failures.append(what)

    def finish(self, ledger_path: Path, name: str) -> int:
        """Print the ledger's timeline, check its chain; 0 when every step behaved."""
        from handrail.recorder import Ledger, timeline

        with Ledger(ledger_path) as ledger:
            self.say("\nledger timeline:")
            self.say(timeline(ledger.entries()))
            report = ledger.verify()
            self.expect("the ledger's hash chain verifies", report.ok, report.message)
        if self.failures:
            self.say(f"\n{name} FAILED: {len(self.failures)} step(s) did not behave as stated")
            return 1
        self.say(f"\n{name} passed: every step behaved as stated")
        return 0


def run_demo(data_dir: Path, *, chromium: str | None = None, out: TextIO = sys.stdout) -> int:
    """Run the demo with its data in ``data_dir``; return 0 when every step behaved."""
    from handrail._procs import start_authz, start_executor
    from handrail.authz import AuthzClient, Store
    from handrail.executor import ExecutorClient, Outcome
    from handrail.scenarios import SubscriptionApp

    steps = Steps(out)
    data_dir.mkdir(parents=True, exist_ok=True)
    tokens = {name: secrets.token_urlsafe(24) for name in (AGENT, OPERATOR, EXECUTOR)}
    with Store(data_dir / "authz.sqlite") as store:
        store.add_principal(AGENT, "agent", tokens[AGENT])
        store.add_principal(OPERATOR, "operator", tokens[OPERATOR])
        store.add_principal(EXECUTOR, "executor", tokens[EXECUTOR])

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
        grant = operator.grant(AGENT, TARGET, ["input", "submit"], [base], note="turn off the renewal of Pro Monthly")
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
