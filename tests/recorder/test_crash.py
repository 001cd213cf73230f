"""Kill a process appending to the ledger at random moments; the ledger must hold up."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from handrail.recorder import Ledger

# Two threads append intent/result pairs (so group commit is in play) and print each
# entry's seq and hash once append() has returned, i.e. once it is durable.
CHILD = r"""
import sys, threading
from handrail.recorder import Ledger

ledger = Ledger(sys.argv[1])
run = sys.argv[2]
lock = threading.Lock()

def say(entry):
    with lock:
        print(entry.seq, entry.entry_hash, flush=True)

def work(n):
    sid = f"{run}-t{n}"
    ledger.append("session_open", session_id=sid, principal="agent", body={"target": f"t{n}"})
    i = 0
    while True:
        aid = f"{sid}-a{i}"
        say(ledger.intent(sid, aid, f"k{i}", "agent", 1, {"action": "click", "i": i}))
        say(ledger.result(sid, aid, f"k{i}", "agent", 1, "DONE", "ALLOW", "OBSERVED", True))
        i += 1

print("ready", flush=True)
threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def _open_intents(ledger: Ledger) -> set[tuple[str, str]]:
    """Intents without a result or reconcile, computed independently of recover()."""
    intents: set[tuple[str, str]] = set()
    closed: set[tuple[str, str]] = set()
    for entry in ledger.iter_entries():
        key = (entry.session_id, entry.action_id)
        if entry.kind == "intent":
            intents.add(key)
        elif entry.kind in ("result", "reconcile"):
            closed.add(key)
    return intents - closed


@pytest.mark.slow
def test_sigkill_at_random_moments(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    rng = random.Random(6)
    total_recovered = 0
    for run in range(20):
        child = subprocess.Popen(
            [sys.executable, str(script), str(path), f"r{run}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        durable: list[str] = []
        reader = threading.Thread(target=durable.extend, args=(child.stdout,))
        reader.start()
        time.sleep(rng.uniform(0.0, 0.25))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        reader.join(timeout=30)
        child.stdout.close()
        assert child.returncode == -signal.SIGKILL

        with Ledger(path) as ledger:
            report = ledger.verify()
            assert report.ok, f"run {run}: {report.message}"
            stored = {e.seq: e.entry_hash for e in ledger.iter_entries()}
            for line in durable:  # every append that returned survived the kill
                if not line.endswith("\n"):
                    continue  # killed while printing
                seq, digest = line.split()
                assert stored.get(int(seq)) == digest, f"run {run}: entry #{seq} was lost"

            lacking = _open_intents(ledger)
            recovered = ledger.recover()
            assert {(r.session_id, r.action_id) for r in recovered} == lacking, f"run {run}"
            assert all(r.target in ("t0", "t1") for r in recovered)
            assert ledger.recover() == []
            assert ledger.verify().ok
            total_recovered += len(recovered)
    # The kills landed between an intent and its result at least sometimes.
    assert total_recovered > 0
