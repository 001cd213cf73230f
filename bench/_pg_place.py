"""Where the bench's PostgreSQL and its timing thread run and what CPU its processes spend
(``/proc`` and ``sched_setaffinity``), for ``authz_scale.py``."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg


def proc_stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command's name (state first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def postgres_pids(postmaster: int) -> list[int]:
    """The PostgreSQL server's processes: the postmaster and its children (the backends)."""
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(proc_stat(int(entry.name))[1]) == postmaster:
                    pids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return pids


def place_postgres(postmaster: int, cpus: set[int]) -> bool:
    """Keep the PostgreSQL server's processes on ``cpus``; False where this process may not."""
    try:
        for pid in postgres_pids(postmaster):
            os.sched_setaffinity(pid, cpus)
    except PermissionError:
        return False
    except ProcessLookupError:
        pass
    return True


def client_cpus(server_cpu: int) -> set[int] | None:
    """The CPUs a timing thread is kept on while it times servers kept on ``server_cpu``:
    the others this process may use (None: there are none, it runs anywhere)."""
    rest = os.sched_getaffinity(0) - {server_cpu}
    return rest or None


@contextlib.contextmanager
def timing_thread_on(cpus: set[int] | None) -> Iterator[None]:
    """Keep the calling thread (only it: ``sched_setaffinity(0)`` is the thread on Linux)
    on ``cpus`` meanwhile; None leaves it where it was."""
    before = os.sched_getaffinity(0)
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def round_trip_us(dsn: str, own: int, backend: int) -> float:
    """p50 of a bare ``SELECT 1`` from this thread on CPU ``own`` to a backend on CPU ``backend``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        os.sched_setaffinity(int(row[0]), {backend})
        times = []
        with timing_thread_on({own}):
            for _ in range(2000):
                t0 = time.perf_counter()
                conn.pgconn.exec_(b"SELECT 1")
                times.append(time.perf_counter() - t0)
    return statistics.median(times[200:]) * 1e6


class CpuMeter:
    """CPU seconds spent by the run's own processes (this client, the sidecars, the
    PostgreSQL server and its backends) and how busy the machine's cores were (any process),
    between two readings of ``/proc``."""

    def __init__(self, sidecars: list[int], postmaster: int) -> None:
        self.sidecars = sidecars
        self.postmaster = postmaster
        self._tick = os.sysconf("SC_CLK_TCK")

    def _cpu(self, pid: int, *, reaped: bool = False) -> float:
        """utime + stime of ``pid`` (and of its children it reaped), in seconds; 0 once gone."""
        try:
            f = proc_stat(pid)
        except OSError:
            return 0.0
        ticks = int(f[11]) + int(f[12]) + (int(f[13]) + int(f[14]) if reaped else 0)
        return ticks / self._tick

    def _postgres(self) -> float:
        children = postgres_pids(self.postmaster)[1:]
        return self._cpu(self.postmaster, reaped=True) + sum(self._cpu(pid) for pid in children)

    @staticmethod
    def _machine() -> tuple[int, int]:
        """(busy, all) jiffies of every core, any process."""
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        return sum(values) - idle, sum(values)

    def read(self) -> tuple[float, float, float, tuple[int, int], float]:
        t = os.times()
        sidecars = sum(self._cpu(pid) for pid in self.sidecars)
        return t.user + t.system, sidecars, self._postgres(), self._machine(), time.perf_counter()

    def measure(self, work: Callable[[], float]) -> tuple[float, dict[str, float]]:
        """Run ``work`` (it returns operations/s); that rate and the CPU it took, per operation."""
        before = self.read()
        rate = work()
        after = self.read()
        wall = after[4] - before[4]
        ops = max(1.0, rate * wall)
        client, sidecars, postgres = after[0] - before[0], after[1] - before[1], after[2] - before[2]
        busy = (after[3][0] - before[3][0]) / max(1, after[3][1] - before[3][1])
        return rate, {
            "client_us": client / ops * 1e6,
            "sidecars_us": sidecars / ops * 1e6,
            "postgres_us": postgres / ops * 1e6,
            "total_us": (client + sidecars + postgres) / ops * 1e6,
            "own_share": (client + sidecars + postgres) / (wall * (os.cpu_count() or 1)),
            "machine_busy": busy,
        }
