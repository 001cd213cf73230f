"""``--cpus``: the list a server is kept on, read as ``taskset`` reads it, and refused in one
line when it names anything this process may not run on."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handrail._cpus import parse_cpus, pin_process, span

ALLOWED = frozenset(os.sched_getaffinity(0))
LAST = max(ALLOWED)


def test_forms_taskset_takes() -> None:
    assert parse_cpus(str(LAST)) == {LAST}
    assert parse_cpus(f"{min(ALLOWED)}-{LAST}") == set(range(min(ALLOWED), LAST + 1)) & ALLOWED
    assert parse_cpus(f" {LAST} , {LAST}-{LAST}") == {LAST}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "expected CPU numbers"),
        ("x", "expected CPU numbers"),
        ("1,", "expected CPU numbers"),
        ("-1", "expected CPU numbers"),
        ("1-", "expected CPU numbers"),
        ("\uff11", "expected CPU numbers"),  # a full-width digit: str.isdigit says yes
        ("0-4294967296", "expected CPU numbers"),  # not a set of four billion CPUs
        ("1-0", "the range 1-0 is empty"),
        (str(LAST + 1), f"CPU {LAST + 1} is not one this process may use ({span(ALLOWED)})"),
        (f"0-{LAST + 1}", f"CPU {LAST + 1} is not one this process may use"),
        ("999999", "CPU 999999 is not one this process may use"),
    ],
)
def test_refused_in_one_line_naming_the_flag(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"^--cpus") as caught:
        parse_cpus(text)
    message = str(caught.value)
    assert says in message
    assert "\n" not in message


@given(st.frozensets(st.integers(0, 300), min_size=1))
def test_span_reads_back(cpus: frozenset[int]) -> None:
    written = span(cpus)
    read: set[int] = set()
    for part in written.split(","):
        low, _, high = part.partition("-")
        read.update(range(int(low), int(high or low) + 1))
    assert read == cpus
    assert written.count(",") + 1 == sum(1 for c in cpus if c - 1 not in cpus)  # one part per run


def test_pin_process_reaches_running_threads_and_later_ones() -> None:
    before = os.sched_getaffinity(0)
    started = threading.Event()
    release = threading.Event()
    seen: dict[str, set[int]] = {}

    def running() -> None:
        started.set()
        release.wait(10)
        seen["running"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=running)
    thread.start()
    started.wait(10)
    try:
        pin_process(frozenset({LAST}))
        later = threading.Thread(target=lambda: seen.__setitem__("later", os.sched_getaffinity(0)))
        later.start()
        later.join(10)
        release.set()
        thread.join(10)
        assert seen == {"running": {LAST}, "later": {LAST}}
        assert os.sched_getaffinity(0) == {LAST}
    finally:
        release.set()
        os.sched_setaffinity(0, before)
        for task in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(task), before)
            except ProcessLookupError:
                continue
