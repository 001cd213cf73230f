"""``handrail ledger tail`` and ``handrail ledger verify``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ._errors import LedgerError
from ._ledger import Ledger, timeline

DATA_DIR_ENV = "HANDRAIL_DATA_DIR"
DEFAULT_DATA_DIR = "./handrail-data"
LEDGER_FILE = "ledger.sqlite"


def register(subparsers: Any) -> None:
    """Add the ``ledger`` command and its subcommands to the ``handrail`` parser.

    Args:
        subparsers: the object ``ArgumentParser.add_subparsers()`` returned.
    """
    ledger = subparsers.add_parser("ledger", help="read and verify the action ledger")
    commands = ledger.add_subparsers(dest="ledger_command", required=True, metavar="COMMAND")

    tail = commands.add_parser("tail", help="print the last entries as a timeline")
    _add_location(tail)
    tail.add_argument("-n", type=int, default=20, help="how many entries (default 20)")
    tail.add_argument("--session", default=None, help="only this session's entries")
    tail.set_defaults(func=run_tail)

    verify = commands.add_parser("verify", help="recompute the hash chain")
    _add_location(verify)
    verify.set_defaults(func=run_verify)


def _add_location(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help="the ledger file (overrides --data-dir)")
    parser.add_argument(
        "--data-dir",
        default=None,
        help=f"folder holding {LEDGER_FILE} (default ${DATA_DIR_ENV} or {DEFAULT_DATA_DIR})",
    )


def ledger_path(db: str | None = None, data_dir: str | None = None) -> Path:
    """Resolve the ledger file: ``--db``, else ``<data dir>/ledger.sqlite``.

    The data dir is ``data_dir``, else ``$HANDRAIL_DATA_DIR``, else ``./handrail-data``.
    """
    if db:
        return Path(db)
    folder = data_dir or os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
    return Path(folder) / LEDGER_FILE


def _open_existing(args: argparse.Namespace) -> Ledger | None:
    path = ledger_path(args.db, args.data_dir)
    if not path.is_file():
        print(f"error: no ledger at {path}", file=sys.stderr)
        return None
    try:
        return Ledger(path)
    except LedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def run_tail(args: argparse.Namespace) -> int:
    """Print the last ``-n`` entries; exit 0, or 2 when the ledger cannot be read."""
    ledger = _open_existing(args)
    if ledger is None:
        return 2
    with ledger:
        try:
            entries = ledger.tail(args.n, session_id=args.session)
        except LedgerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if entries:
        print(timeline(entries))
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """Verify the chain; exit 0 when it holds, 1 when it does not, 2 on a read error."""
    ledger = _open_existing(args)
    if ledger is None:
        return 2
    with ledger:
        try:
            report = ledger.verify()
        except LedgerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if report.ok:
        print(f"ok: {report.count} entries, chain verified")
        return 0
    print(f"BAD at entry #{report.first_bad_seq}: {report.message}")
    return 1
