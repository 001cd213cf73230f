"""A short scripted agent: turn off a subscription's auto-renewal, safely.

It observes, finds the elements by role and name, acts with expectations, and handles
the refusals Handrail can give: a stale ref (observe again and retry once), a person
holding the lease (stop and say so), and an unknown outcome (observe the real state and
reconcile; never click again blindly).

    python examples/cancel_renewal_agent.py --executor 127.0.0.1:7701 --token $AGENT_TOKEN \\
        --target browser:subscription --url http://127.0.0.1:8000/

(Pass a token that begins with "-" as --token=VALUE.)
"""

from __future__ import annotations

import argparse
import sys

from handrail.executor import (
    ExecutorClient,
    HeldByHumanError,
    OutcomeUnknownError,
    Session,
    StaleObservationError,
    StaleRefError,
)


def click(session: Session, name: str, expect: str) -> None:
    """Click the button ``name`` expecting ``expect`` to show; re-observe once if stale."""
    for attempt in (1, 2):
        session.observe()
        try:
            session.click(session.find("button", name), expect_text=expect).raise_for_outcome()
            return
        except (StaleRefError, StaleObservationError) as exc:
            if attempt == 2:
                raise
            print(f"  {name!r}: {exc.reason}, observing again")


def run(executor: str, token: str, target: str, url: str) -> int:
    with ExecutorClient(executor, token, strict=True) as client:
        session = client.open_session(target=target, start_url=url)
        try:
            session.observe()
            if "Auto-renew is off" in session.snapshot:
                print("auto-renew is already off")
                return 0
            click(session, "Turn off auto-renew", expect="No thanks, turn off renewal")
            click(session, "No thanks, turn off renewal", expect="Auto-renew is off")
            print("auto-renew is off; the plan stays active until its end date")
            return 0
        except HeldByHumanError:
            print("a person has taken over this session: stopping")
            return 2
        except OutcomeUnknownError as exc:
            obs = session.observe()
            happened = "Auto-renew is off" in obs.snapshot
            verdict = "HAPPENED" if happened else "DID_NOT_HAPPEN"
            session.reconcile(exc.result.action_id, verdict, f"the account page shows: {obs.title}")  # type: ignore[attr-defined]
            print(f"the outcome was unknown; reconciled as {verdict}")
            return 0 if happened else 1
        finally:
            session.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executor", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--url", required=True)
    args = ap.parse_args()
    return run(args.executor, args.token, args.target, args.url)


if __name__ == "__main__":
    sys.exit(main())
