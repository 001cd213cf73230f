"""What both demos share: the principals they make, and the steps they print and judge."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from handrail.authz import Store
from handrail.recorder import Ledger, timeline

__all__ = ["AGENT", "EXECUTOR", "OPERATOR", "Steps", "make_principals"]

AGENT = "demo-agent"
OPERATOR = "ops-alice"
EXECUTOR = "executor-1"


def make_principals(data_dir: Path) -> dict[str, str]:
    """Create the demo's agent, operator and executor principals; return their tokens."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with Store(data_dir / "authz.sqlite") as store:
        tokens = {
            AGENT: store.add_principal(AGENT, "agent"),
            OPERATOR: store.add_principal(OPERATOR, "operator"),
            EXECUTOR: store.add_principal(EXECUTOR, "executor"),
        }
    return tokens


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
