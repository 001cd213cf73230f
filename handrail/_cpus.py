"""Keeping a server process on chosen CPUs (``--cpus``).

A Python gRPC server hands every call between threads (gRPC's own, the one that polls,
the handler's): some sixteen context switches a call. Left to the scheduler on a small
host, those threads wake on whichever core is idle and the interpreter's state follows
them across cores; on the two-core reference machine that makes a sidecar ``Check`` about
200 us slower at p50 than the same process kept on one core, and halves its checks/s
(``bench/authz_scale.py`` prints both; ``docs/deploy.md`` says when to pin).

The list takes ``taskset``'s form: ``1``, ``0-3``, ``0,2-3``.
"""

from __future__ import annotations

import os


def parse_cpus(text: str) -> frozenset[int]:
    """The CPUs ``text`` names (``1``, ``0-3``, ``0,2-3``), each one this process may run on.

    Raises:
        ValueError: a one-line reason naming what is wrong (not a list, an empty range, a CPU
            outside this process's allowed set, or a system without CPU affinity).
    """
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError("--cpus: this system cannot keep a process on chosen CPUs")
    allowed = frozenset(os.sched_getaffinity(0))
    cpus: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not _number(low) or (dash and not _number(high)):
            raise ValueError(f"--cpus {text!r}: expected CPU numbers and ranges such as 1, 0-3 or 0,2-3")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"--cpus {text!r}: the range {part.strip()} is empty")
        for cpu in (first, last, *range(first, min(last, max(allowed)) + 1)):
            if cpu not in allowed:
                raise ValueError(f"--cpus {text!r}: CPU {cpu} is not one this process may use ({span(allowed)})")
            cpus.add(cpu)
    return frozenset(cpus)


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 6


def pin_process(cpus: frozenset[int]) -> None:
    """Keep every thread of this process on ``cpus``: the calling thread and those running
    now; threads started later inherit it from the thread that starts them."""
    os.sched_setaffinity(0, cpus)
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:  # no /proc: the calling thread is done, and threads started later follow
        return
    for task in tasks:
        try:
            os.sched_setaffinity(int(task), cpus)
        except (ProcessLookupError, ValueError):  # the thread ended meanwhile
            continue


def span(cpus: frozenset[int]) -> str:
    """``cpus`` written as ``taskset`` writes a list: ``0-3,6``."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
