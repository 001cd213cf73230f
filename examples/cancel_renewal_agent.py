"""A short scripted agent: turn off a subscription's auto-renewal, safely.

It opens a session (which takes the first observation), finds the elements by role and
name, acts with expectations, and handles every refusal Handrail can give it:

- the page changed (``STALE_REF``, ``STALE_OBSERVATION``) or the lease moved under it
  (``STALE_EPOCH``, ``NO_LEASE`` right after a hand-back): observe again and retry once;
- a person holds the lease (``HELD_BY_HUMAN``): stop and say so;
- the sidecar did not answer (``AUTHZ_UNAVAILABLE``): wait a moment and retry once;
- the action is outside its grants or forbidden (``OUT_OF_SCOPE``, ``POLICY_FORBID``,
  ``GRANT_*``, ``APPROVAL_*``): stop and say which, never work around it;
- an earlier action's outcome is unknown (``RECONCILE_REQUIRED``) or this one's is
  (``UNKNOWN``): observe the real state and reconcile, never click again blindly;
- the call itself fails: another agent holds the target, the token is refused, the
  executor is unreachable: one line, and an exit code.

    python examples/cancel_renewal_agent.py --executor 127.0.0.1:7701 --token $AGENT_TOKEN \\
        --target browser:subscription --url http://127.0.0.1:8000/

Exit codes: 0 done; 1 the renewal is still on; 2 refused (scope, policy, a person, no
lease); 3 the call failed (token, another agent, the executor). (Pass a token that begins
with "-" as --token=VALUE.)
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

from handrail.executor import (
    ActionError,
    ActionFailedError,
    ActionRefusedError,
    AuthzUnavailableRefusalError,
    ExecutorError,
    ExecutorUnavailableError,
    HeldByHumanError,
    LeaseHeldError,
    NoLeaseError,
    OutcomeUnknownError,
    PermissionDeniedError,
    ReconcileRequiredError,
    Session,
    StaleEpochError,
    StaleObservationError,
    StaleRefError,
    UnauthenticatedError,
)

RENEWAL_OFF = "Auto-renew is off"
#: Refusals after which looking again may be enough (once).
LOOK_AGAIN = (StaleRefError, StaleObservationError, StaleEpochError, NoLeaseError, AuthzUnavailableRefusalError)


class Stop(Exception):
    """Stop the run with an exit code and one line to say why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def click(session: Session, name: str, expect: str) -> None:
    """Click the button ``name`` expecting ``expect`` to show; look again once if stale."""
    for attempt in (1, 2):
        try:
            session.click(session.find("button", name), expect_text=expect).raise_for_outcome()
            return
        except LOOK_AGAIN as exc:
            if attempt == 2:
                raise
            print(f"  {name!r}: {exc.reason}, observing again")
            if isinstance(exc, AuthzUnavailableRefusalError):
                time.sleep(1.0)
            session.observe()
        except LookupError as exc:  # the button is not on the page as observed
            raise Stop(1, f"cannot find {name!r}: {exc}") from None


def reconcile_unknown(session: Session, action_id: str) -> int:
    """Look at the real state and say what became of an action of unknown outcome."""
    obs = session.observe()
    happened = RENEWAL_OFF in obs.snapshot
    verdict = "HAPPENED" if happened else "DID_NOT_HAPPEN"
    session.reconcile(action_id, verdict, f"the account page shows: {obs.title}")
    print(f"the outcome of {action_id} was unknown; reconciled as {verdict}")
    return 0 if happened else 1


def turn_off_renewal(session: Session) -> int:
    if session.info.lease_epoch == 0:
        why = session.info.lease_reason or "unknown reason"
        if session.latest is not None and session.latest.url == "about:blank":  # nothing loads unjudged
            raise Stop(2, f"no control lease ({why}): the start page was not loaded")
        print(f"no control lease yet ({why}); trying anyway")
    if RENEWAL_OFF in session.snapshot:
        print("auto-renew is already off")
        return 0
    try:
        click(session, "Turn off auto-renew", expect="No thanks, turn off renewal")
        click(session, "No thanks, turn off renewal", expect=RENEWAL_OFF)
    except HeldByHumanError:
        raise Stop(2, "a person has taken over this session: stopping") from None
    except OutcomeUnknownError as exc:
        return reconcile_unknown(session, exc.result.action_id)  # type: ignore[attr-defined]
    except ReconcileRequiredError as exc:
        raise Stop(2, f"an earlier action on this target awaits reconciliation: {exc}") from None
    except (ActionRefusedError, ActionFailedError) as exc:
        # OUT_OF_SCOPE, POLICY_FORBID, GRANT_*, APPROVAL_*, or still stale after a second look
        raise Stop(2, f"refused: {exc}") from None
    print("auto-renew is off; the plan stays active until its end date")
    return 0


def run(executor: str, token: str, target: str, url: str) -> int:
    from handrail.executor import ExecutorClient

    try:
        with ExecutorClient(executor, token, strict=True) as client:
            session = client.open_session(target=target, start_url=url)
            try:
                return turn_off_renewal(session)
            finally:
                with contextlib.suppress(ExecutorError):
                    session.close()
    except Stop as stop:
        print(stop, file=sys.stderr)
        return stop.code
    except LeaseHeldError:
        print(f"another agent holds {target}: try again when it is free", file=sys.stderr)
        return 3
    except (UnauthenticatedError, PermissionDeniedError) as exc:
        print(f"the executor refuses this token ({exc.reason}): {exc}", file=sys.stderr)
        return 3
    except ExecutorUnavailableError:
        print(f"the executor at {executor} cannot be reached", file=sys.stderr)
        return 3
    except ActionError as exc:  # anything strict mode raised that the steps above did not expect
        print(f"stopped: {exc}", file=sys.stderr)
        return 2
    except ExecutorError as exc:  # any other call that could not be served
        print(f"the executor could not serve a call: {exc}", file=sys.stderr)
        return 3


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
