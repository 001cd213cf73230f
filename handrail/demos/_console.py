"""``handrail demo --console``: a person takes the wheel in the operator console.

It starts the authz sidecar (told where the console is), the executor and the console on
loopback, serves the subscription page with a second factor, and prints the console's URL
and the operator token to sign in with. The scripted agent declines the retention offer,
meets "Enter the code sent to your phone", asks for a person, and waits. In the console,
take the wheel, click the Code field in the live view, type the code it shows, press
Enter, and hand back: the agent observes again and finishes. Ctrl-C stops it all.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TextIO

from handrail.authz import AuthzClient
from handrail.console import ConsoleConfig, bind, start_console
from handrail.executor import ExecutorClient, PersonStatus
from handrail.scenarios import SECOND_FACTOR_CODE, SecondFactorApp, start_authz, start_executor

from ._common import AGENT, EXECUTOR, OPERATOR, Steps, make_principals

__all__ = ["run_console_demo"]

TARGET = "browser:subscription-console-demo"


def run_console_demo(
    data_dir: Path,
    *,
    chromium: str | None = None,
    listen: str = "127.0.0.1:0",
    wait_s: float = 600.0,
    out: TextIO = sys.stdout,
) -> int:
    """Run the console demo; return 0 when the person handed back and the agent finished."""
    steps = Steps(out)
    tokens = make_principals(data_dir)
    with ExitStack() as stack:
        app = SecondFactorApp()
        base = app.start()
        stack.callback(app.stop)
        sock = bind(listen)  # the console's port first: the sidecar must know it
        port = sock.getsockname()[1]
        sock.close()
        authz = start_authz(data_dir, extra=["--console-origin", f"http://127.0.0.1:{port}"])
        stack.callback(authz.stop)
        executor = start_executor(data_dir, authz.address, tokens[EXECUTOR], chromium=chromium)
        stack.callback(executor.stop)
        console = start_console(
            ConsoleConfig(authz=authz.address, executors=(executor.address,), listen=f"127.0.0.1:{port}")
        )
        stack.callback(console.stop)
        steps.say(f"fixture: {base}/ · authz {authz.address} · executor {executor.address}")
        steps.say(f"\nOPERATOR CONSOLE: {console.url}/")
        steps.say(f"sign in as {OPERATOR} with the token: {tokens[OPERATOR]}")
        steps.say(f"the code the merchant sent to the person's phone: {SECOND_FACTOR_CODE}\n")

        with AuthzClient(authz.address, tokens[OPERATOR]) as ops:
            ops.grant(AGENT, TARGET, ["navigate"], [base], note="the merchant's pages")
            ops.grant(AGENT, TARGET, ["input", "submit"], [base], note="turn off the renewal of Pro Monthly")
        agent = stack.enter_context(ExecutorClient(executor.address, tokens[AGENT]))
        session = agent.open_session(target=TARGET, start_url=base + "/")
        session.observe()
        session.click(session.find("button", "Turn off auto-renew")).raise_for_outcome()
        session.observe()
        session.click(
            session.find("button", "No thanks, turn off renewal"), expect_text="Enter the code"
        ).raise_for_outcome()
        session.observe()
        steps.say("agent: the merchant asks for the code sent to the person's phone; asking for a person")
        asked = session.ask_for_person("Enter the code sent to your phone")
        steps.say(f"agent: waiting up to {wait_s:.0f} s — open the console, take the wheel, type the code, hand back")
        try:
            back = session.ask_for_person(request_id=asked.request_id, wait_ms=int(wait_s * 1000))
        except KeyboardInterrupt:
            steps.say("\nstopped")
            return 1
        steps.expect(
            "the person took the wheel and handed it back", back.status is PersonStatus.HANDED_BACK, back.status
        )
        obs = session.observe()
        steps.expect("the agent observes again and finds the renewal off", "Auto-renew is off" in obs.snapshot)
        session.close()
        stack.pop_all().close()
    return steps.finish(data_dir / "ledger.sqlite", "console demo")
