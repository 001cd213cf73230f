"""The caller's deadline as the stores see it (``authz/_deadline.py``): a call whose
deadline is spent does nothing; a wait ends a margin before the deadline; nothing starts
after it; a committed change lifts it; outside a call nothing is bounded. The stores under
real load are in test_deadline_sqlite.py and test_deadline_pg.py."""

from __future__ import annotations

import logging
import time

import pytest

from handrail.authz._deadline import MAX_MARGIN_S, CallDeadline, changed, in_call, left_ms, left_s, start, wait_s
from handrail.authz._errors import DeadlineExceededError, StoreBusyError


def test_a_call_whose_deadline_is_spent_runs_nothing_and_is_one_line(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []
    caplog.set_level(logging.INFO, logger="handrail.authz")
    with pytest.raises(DeadlineExceededError, match="passed before the call was served"), CallDeadline(0.0, "Check"):
        ran.append("handler")
    assert ran == []
    (record,) = caplog.records
    assert record.getMessage().startswith("authz: Check cut short: the caller's deadline passed")
    assert record.exc_info is None


def test_a_wait_ends_a_margin_before_the_deadline_and_nothing_starts_after_it() -> None:
    with CallDeadline(0.5, "Check"):
        wait, bounded = wait_s(5.0, "the check's commit")
        assert bounded and 0.3 < wait <= 0.5 - 0.05  # a tenth kept back
        start("the check's commit")
        ms = left_ms()
        assert ms is not None and 300 < ms <= 500
        time.sleep(0.55)
        with pytest.raises(DeadlineExceededError, match="before the check's commit"):
            start("the check's commit")
        with pytest.raises(DeadlineExceededError, match="before the check's commit"):
            wait_s(5.0, "the check's commit")
    assert not in_call() and left_s() is None
    assert wait_s(5.0, "anything") == (5.0, False)  # outside a call: as before
    start("anything")


def test_a_long_deadline_leaves_the_pools_own_timeout_and_keeps_at_most_100_ms() -> None:
    with CallDeadline(60.0, "Check"):
        assert wait_s(5.0, "a statement") == (5.0, False)
        wait, bounded = wait_s(120.0, "a statement")
        assert bounded and 59.0 < wait <= 60.0 - MAX_MARGIN_S


def test_a_committed_change_lifts_the_deadline_for_the_rest_of_the_call() -> None:
    """What follows a change (its Watch event, the answer) must not be cut short."""
    with CallDeadline(0.05, "TakeOver"):
        time.sleep(0.06)
        changed()
        start("publishing the change")
        assert left_s() is None and in_call()
        assert wait_s(5.0, "publishing the change") == (5.0, False)
    assert not in_call()


def test_a_call_without_a_deadline_is_still_a_call() -> None:
    """gRPC's "no deadline" is a remaining time of centuries: nothing is bounded, but the
    store knows it serves a call (a locked SQLite file is then UNAVAILABLE, not INTERNAL)."""
    with CallDeadline(1e12, "Check"):
        assert in_call() and left_s() is None
        assert wait_s(5.0, "a statement") == (5.0, False)
    with CallDeadline(None, "Check"):
        assert in_call() and left_ms() is None


def test_a_busy_store_is_logged_in_one_line_and_passed_on(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="handrail.authz")
    with pytest.raises(StoreBusyError), CallDeadline(1.0, "Acquire"):
        raise StoreBusyError("no connection to postgresql://u@h:5432/db within 0.9 s")
    (record,) = caplog.records
    assert record.getMessage() == "authz: Acquire cut short: no connection to postgresql://u@h:5432/db within 0.9 s"
