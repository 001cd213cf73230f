"""``handrail replay PATH... [--repeat K]`` and ``handrail record --session S -o FILE``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ._errors import RecordError, ScenarioError
from ._loading import load_scenario
from ._record import record_session
from ._replay import RunResult, replay

__all__ = ["register", "run_record", "run_replay", "scenario_paths"]


def register(sub: Any) -> None:
    """Add ``replay`` and ``record`` to the top-level ``handrail`` parser.

    Args:
        sub: the object ``ArgumentParser.add_subparsers()`` returned.
    """
    replay = sub.add_parser(
        "replay",
        help="replay scenario files on a fresh stack and report pass^K",
        description="Replay each scenario K times, each run on a fresh stack (authz, "
        "executor, fixture app, data dir); print pass^K per scenario and every divergence. "
        "Exits 1 when any scenario failed, 2 when a file is not a valid scenario.",
    )
    replay.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or folders")
    replay.add_argument("--repeat", "-k", type=int, default=1, help="runs per scenario (K)")
    replay.add_argument("--chromium", default=None, help="Chromium executable")
    replay.add_argument("--keep", type=Path, default=None, help="keep each run's data dir under this folder")
    replay.add_argument("-v", "--verbose", action="store_true", help="print every step played")
    replay.set_defaults(func=run_replay)

    record = sub.add_parser(
        "record",
        help="turn a session's ledger entries into a scenario file",
        description="Read one session's entries from the ledger (its target and start URL, "
        "each intent with its result, each refusal) and write a scenario that replays it.",
    )
    record.add_argument("--session", required=True, help="the session id (s_...)")
    record.add_argument("-o", "--output", type=Path, required=True, help="the scenario file")
    record.add_argument("--data-dir", default=None, help="the data dir holding ledger.sqlite")
    record.add_argument("--db", default=None, help="the ledger file (overrides --data-dir)")
    record.add_argument("--fixture", default="subscription", help="the fixture app the session ran against")
    record.add_argument("--name", default=None, help="the scenario name (default: file stem)")
    record.add_argument(
        "--state-url",
        default=None,
        help="the fixture's /state URL: record its state fields and POST counts as checks",
    )
    record.set_defaults(func=run_record)


def scenario_paths(paths: list[str]) -> list[Path]:
    """Files as given; folders expand to their ``*.yaml`` files, sorted."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(p.glob("*.yaml")))
        else:
            out.append(p)
    return out


def run_replay(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Replay the scenarios; 0 when all passed (or were skipped), 1 on a failure, 2 on bad input."""
    if args.repeat < 1:
        print("handrail replay: --repeat must be at least 1", file=sys.stderr)
        return 2
    files = scenario_paths(args.paths)
    scenarios = []
    bad = False
    for path in files:
        try:
            scenarios.append((path, load_scenario(path)))
        except ScenarioError as exc:
            print(exc, file=sys.stderr)
            bad = True
    if bad:
        return 2
    if not scenarios:
        print("handrail replay: no scenario files", file=sys.stderr)
        return 2
    started = time.monotonic()
    passed = failed = skipped = 0
    for path, scenario in scenarios:

        def progress(i: int, run: RunResult, name: str = scenario.name) -> None:
            mark = "ok" if run.ok else "FAIL"
            print(f"  {name} run {i}/{args.repeat}: {mark} ({run.seconds:.1f} s)", file=out)
            if args.verbose:
                for line in run.log:
                    print(f"    {line}", file=out)
            for d in run.divergences:
                print(f"    DIVERGED: {d}", file=out, flush=True)

        keep = args.keep / scenario.name if args.keep is not None else None
        report = replay(scenario, repeat=args.repeat, chromium=args.chromium, keep_dir=keep, on_run=progress)
        print(f"{report.summary()}  [{path}]", file=out, flush=True)
        if report.skipped is not None:
            skipped += 1
        elif report.passed:
            passed += 1
        else:
            failed += 1
    total = time.monotonic() - started
    print(
        f"\n{len(scenarios)} scenario(s): {passed} pass^{args.repeat}, {failed} failed, "
        f"{skipped} skipped, in {total:.1f} s",
        file=out,
    )
    return 1 if failed else 0


def run_record(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Write the scenario of one recorded session; 0 on success, 2 when it cannot."""
    db = Path(args.db) if args.db else Path(args.data_dir or "handrail-data") / "ledger.sqlite"
    if not db.is_file():
        print(f"handrail record: no ledger at {db}", file=sys.stderr)
        return 2
    try:
        text = record_session(
            db,
            args.session,
            fixture=args.fixture,
            name=args.name or args.output.stem,
            state_url=args.state_url,
            warn=lambda text: print(f"handrail record: warning: {text}", file=sys.stderr),
        )
    except RecordError as exc:
        print(f"handrail record: {exc}", file=sys.stderr)
        return 2
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, "utf-8")
    print(f"wrote {args.output}", file=out)
    return 0
