"""``handrail ledger``: tail, show, verify, export and timeline.

Every command only reads: the ledger is opened read-only (an auditor's copy in a read-only
directory works; nothing is migrated and the head file is not written). ``--session S``
shows the session's own entries and the lease changes of its target while it was open.

Exit codes: 0 success; 1 the chain does not verify, or ``show`` found nothing; 2 the
ledger cannot be found or read, or an argument is bad.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from handrail._dsn import is_pg_dsn
from handrail._vocabulary import Outcome

from ._bodies import IntentBody, ReconcileBody, ResultBody, SessionOpenBody
from ._chain import canonical_json
from ._cli_chains import Chains
from ._entry import Entry
from ._errors import LedgerError
from ._headfile import head_file_ids, head_file_path
from ._ledger import Ledger
from ._open import FILE_SAFE_ID, open_ledger
from ._timeline import timeline

DATA_DIR_ENV = "HANDRAIL_DATA_DIR"
LEDGER_ENV = "HANDRAIL_LEDGER"
DEFAULT_DATA_DIR = "./handrail-data"
LEDGER_FILE = "ledger.sqlite"
FOLLOW_POLL_S = 0.2
MAX_COUNT = 2**63 - 1  # a seq, and a SQL LIMIT, is a 64-bit integer

_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def register(subparsers: Any) -> None:
    """Add the ``ledger`` command and its subcommands to the ``handrail`` parser.

    Args:
        subparsers: the object ``ArgumentParser.add_subparsers()`` returned.
    """
    ledger = subparsers.add_parser("ledger", help="read, verify and export the action ledger")
    commands = ledger.add_subparsers(dest="ledger_command", required=True, metavar="COMMAND")

    tail = commands.add_parser("tail", help="print the last entries as a timeline")
    _add_location(tail)
    _add_filters(tail)
    tail.add_argument("-n", type=_count, default=20, help="how many entries (default 20; 0 with -f: only new ones)")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new entries (Ctrl-C stops)")
    tail.set_defaults(func=run_tail)

    show = commands.add_parser("show", help="every entry of one action, with its session")
    _add_location(show)
    show.add_argument("action_id", metavar="ACTION_ID", type=_text)
    show.add_argument("--session", default=None, type=_text, help="the action's session, if ids repeat")
    show.set_defaults(func=run_show)

    verify = commands.add_parser("verify", help="recompute the hash chain, check both heads")
    _add_location(verify)
    verify.set_defaults(func=run_verify)

    export = commands.add_parser("export", help="write entries as JSON lines")
    _add_location(export)
    _add_filters(export)
    export.add_argument("--format", choices=["jsonl"], default="jsonl", help="only jsonl")
    export.add_argument("-o", "--output", default=None, help="file to write (default stdout)")
    export.set_defaults(func=run_export)

    line = commands.add_parser("timeline", help="print entries as a readable timeline")
    _add_location(line)
    _add_filters(line)
    line.set_defaults(func=run_timeline)


def _add_location(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get(LEDGER_ENV) or None,
        help="the ledger file, or a postgresql:// URL holding every executor's ledger "
        f"(env {LEDGER_ENV}; overrides --data-dir)",
    )
    parser.add_argument(
        "--executor",
        default=None,
        type=_executor,
        help="with a PostgreSQL ledger: only this executor's chain (default: every executor's)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help=f"folder holding {LEDGER_FILE}; with a PostgreSQL ledger, the executors' head files "
        f"ledger-<id>.head, checked against their chains (default ${DATA_DIR_ENV} or {DEFAULT_DATA_DIR})",
    )


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", default=None, type=_text, help="only this session's entries")
    parser.add_argument("--principal", default=None, type=_text, help="only entries by this principal")
    parser.add_argument(
        "--outcome", default=None, type=_text, help="only entries stating this outcome (DONE, UNKNOWN, ...)"
    )
    parser.add_argument("--kind", default=None, type=_text, help="only entries of this kind")
    parser.add_argument(
        "--since",
        default=None,
        help="only entries from this time on: ISO 8601 (naive means UTC) or an age such as 90s, 15m, 2h, 1d",
    )


def _text(text: str) -> str:
    """An id or filter value: text that a ledger can hold (UTF-8, no NUL). A byte that is
    not UTF-8 in the command line arrives as a lone surrogate; argparse names the option."""
    if "\0" in text:
        raise argparse.ArgumentTypeError("holds a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"{text!a} is not UTF-8 text") from None
    return text


def _executor(text: str) -> str:
    """``--executor``: one chain; empty would have meant every chain, silently."""
    if not text:
        raise argparse.ArgumentTypeError("is empty: name an executor, or leave the option out for every chain")
    return _text(text)


def ledger_path(db: str | None = None, data_dir: str | None = None) -> Path:
    """Resolve the ledger file: ``--db``, else ``<data dir>/ledger.sqlite``.

    The data dir is ``data_dir``, else ``$HANDRAIL_DATA_DIR``, else ``./handrail-data``.
    """
    if db:
        return Path(db)
    return _data_dir(data_dir) / LEDGER_FILE


def _data_dir(data_dir: str | None) -> Path:
    """``data_dir``, else ``$HANDRAIL_DATA_DIR``, else ``./handrail-data``."""
    return Path(data_dir or os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def parse_since(text: str, *, now_ms: int | None = None) -> int:
    """Turn ``--since`` into milliseconds since the epoch.

    Args:
        text: an ISO 8601 time (naive means UTC, like the timeline) or an age such as
            ``"15m"`` (units ms, s, m, h, d).
        now_ms: "now", for ages; the current time by default.

    Raises:
        ValueError: neither form.
    """
    match = _DURATION.match(text.strip())
    if match:
        now = now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
        return now - int(match[1]) * _UNIT_MS[match[2]]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since {text!r}: expected an ISO 8601 time or an age like 15m, 2h, 1d") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    since = parse_since(args.since) if args.since else None
    return {
        "session_id": args.session,
        "principal": args.principal,
        "outcome": args.outcome,
        "kind": args.kind,
        "since_ms": since,
    }


def _matches(entry: Entry, filters: dict[str, Any]) -> bool:
    """Whether ``entry`` passes the filters other than the session (as the store applies them)."""
    if filters.get("kind") and entry.kind != filters["kind"]:
        return False
    if filters.get("principal") and entry.principal != filters["principal"]:
        return False
    if filters.get("since_ms") is not None and entry.ts_ms < filters["since_ms"]:
        return False
    outcome = (filters.get("outcome") or "").upper()
    if outcome:
        stated = "REFUSED" if entry.kind == "refusal" else str(entry.body.get("outcome", "")).upper()
        return stated == outcome
    return True


def _select(ledger: Ledger, filters: dict[str, Any]) -> list[Entry]:
    """The filtered entries; a session's include its target's lease changes."""
    session = filters.get("session_id")
    if not session:
        return ledger.entries(**filters)
    return [e for e in ledger.session_entries(session) if _matches(e, filters)]


def _count(text: str) -> int:
    """``-n``: a whole number of entries, not a negative one (which printed nothing)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is negative: say how many entries to print")
    if n > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{n} is more than {MAX_COUNT} (2**63-1)")
    return n


def _last(ledger: Ledger, n: int, filters: dict[str, Any]) -> list[Entry]:
    """The last ``n`` filtered entries; a session's include its target's lease changes."""
    if n <= 0:
        return []
    if filters.get("session_id"):
        return _select(ledger, filters)[-n:]
    return ledger.tail(n, **filters)


def _open_existing(args: argparse.Namespace, *, head_files: bool = False) -> Chains | None:
    """The chains to read, or None after printing why there are none.

    With ``head_files`` (verify), a chain a head file in the data dir names is read too when
    the store has none: its entries were deleted, which the head file proves."""
    if args.db and is_pg_dsn(args.db):
        return _pg_chains(args, head_files)
    path = ledger_path(args.db, args.data_dir)
    head = head_file_path(path)
    if not path.is_file() and not (head_files and os.path.lexists(head)):
        print(f"error: no ledger at {path}", file=sys.stderr)
        return None

    def open_file(_: str) -> Ledger:
        if not path.is_file():
            raise LedgerError(f"no ledger at {path}", reason="NOT_FOUND")
        return Ledger(path, read_only=True)

    return Chains([""], open_file, lambda _: head, f"there is no ledger at {path}")


def _pg_chains(args: argparse.Namespace, head_files: bool) -> Chains | None:
    dsn: str = args.db
    try:
        from ._postgres import ledger_executors  # psycopg only when a database is named

        heads = _head_dir(args)
        on_file = [e for e in head_file_ids(heads) if FILE_SAFE_ID.fullmatch(e)] if head_files and heads else []
        if args.executor:
            names = [args.executor]
        else:
            try:
                names = ledger_executors(dsn)
            except LedgerError as exc:
                if exc.reason != "NOT_FOUND" or not on_file:
                    raise
                names = []  # no ledger at all, yet head files say there were chains
            names = sorted({*names, *on_file})
    except LedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    if not names:
        print("error: the ledger database holds no executor's chain yet", file=sys.stderr)
        return None

    def head_of(exe: str) -> Path | None:
        # as open_ledger names it; an id that is not a file name has no head file
        if heads is None or not FILE_SAFE_ID.fullmatch(exe):
            return None
        return head_file_path(heads / f"ledger-{exe}")

    def open_chain(exe: str) -> Ledger:
        return open_ledger(dsn, executor_id=exe, head_dir=heads, read_only=True)

    relist = None if args.executor else (lambda: ledger_executors(dsn))  # tail -f: chains begun since
    return Chains(names, open_chain, head_of, "the database has no chain", relist)


def _head_dir(args: argparse.Namespace) -> Path | None:
    """Where a PostgreSQL ledger's head files are: the data dir an executor keeps its own
    in (``ledger-<id>.head``), when it is named or the default one exists here.

    Raises:
        LedgerError: ``--data-dir`` names no folder.
    """
    folder = _data_dir(args.data_dir)
    if folder.is_dir():
        return folder
    if args.data_dir:
        raise LedgerError(f"--data-dir {folder}: no such folder (it holds the executors' head files)")
    return None


def _merged(chains: Chains, entries_of: Callable[[str, Ledger], list[Entry]]) -> list[tuple[str, Entry]]:
    """Entries of every chain, by time (then executor and seq)."""
    found: list[tuple[str, Entry]] = []
    for exe in chains.names:
        with chains.opened(exe) as ledger:
            found += [(exe, entry) for entry in entries_of(exe, ledger)]
    return sorted(found, key=lambda pair: (pair[1].ts_ms, pair[0], pair[1].seq))


def _lines(found: list[tuple[str, Entry]]) -> str:
    """A timeline; each line names its executor when there is more than one chain."""
    return "\n".join(f"[{exe}] {timeline([entry])}" if exe else timeline([entry]) for exe, entry in found)


def run_tail(args: argparse.Namespace) -> int:
    """Print the last ``-n`` entries; with ``-f`` keep printing new ones until stopped."""
    chains = _open_existing(args)
    if chains is None:
        return 2
    try:
        filters = _filters(args)
        heads: dict[str, int] = {}

        def last_of(exe: str, ledger: Ledger) -> list[Entry]:
            got = _last(ledger, args.n, filters)
            heads[exe] = ledger.head()[0]  # -f prints what comes after
            return got

        with chains.kept():
            found = _merged(chains, last_of)
            found = found[-args.n :] if args.n > 0 else []
            if found:
                print(_lines(found), flush=True)
            if args.follow:
                _follow(chains, filters, heads)
    except (LedgerError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _follow(chains: Chains, filters: dict[str, Any], last: dict[str, int]) -> None:
    """Poll every chain (one open at a time) for entries after its head in ``last`` until
    Ctrl-C or SIGTERM.

    Both signals only set the stop flag (seen within one poll): a ``KeyboardInterrupt``
    raised wherever the main thread happens to be (in a read of the ledger, in a print)
    could leave the exit hanging."""
    stop = threading.Event()
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():

        def on_stop(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = {sig: signal.signal(sig, on_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.is_set():
            for exe in chains.relisted():  # a chain begun since: every entry of it is new
                last.setdefault(exe, 0)
            # The filters skip entries, so track the head, not the last entry printed.
            fresh: list[tuple[str, Entry]] = []
            for exe in chains.names:
                if stop.is_set():
                    break
                with chains.opened(exe) as ledger:
                    head = ledger.head()[0]
                    if head > last[exe]:
                        got = ledger.entries(since_seq=last[exe], **filters)
                        fresh += [(exe, entry) for entry in got if entry.seq <= head]
                        last[exe] = head
            if fresh:
                print(_lines(sorted(fresh, key=lambda p: (p[1].ts_ms, p[0], p[1].seq))), flush=True)
            stop.wait(FOLLOW_POLL_S)
    except KeyboardInterrupt:  # a Ctrl-C before the handler was in place
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_show(args: argparse.Namespace) -> int:
    """Print every entry of one action with its session's context; 1 when none."""
    chains = _open_existing(args)
    if chains is None:
        return 2
    try:
        for exe in chains.names:  # an action id is the executor's own: the first chain with it
            with chains.opened(exe) as ledger:
                if not ledger.entries(action_id=args.action_id, limit=1):
                    continue
                if exe:
                    print(f"executor {exe}")
                entries = ledger.entries(action_id=args.action_id, session_id=args.session)
                context = sorted(
                    {
                        entry.seq: entry
                        for sid in sorted({entry.session_id for entry in entries})
                        if sid
                        for entry in ledger.session_entries(sid)
                        if entry.kind in ("session_open", "session_close", "lease_change")
                    }.values(),
                    key=lambda entry: entry.seq,
                )
                break
        else:
            entries = []
    except LedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not entries:
        print(f"no entries for action {args.action_id}", file=sys.stderr)
        return 1
    sessions = sorted({entry.session_id for entry in entries})
    print(f"action {args.action_id}: {_status(entries)}")
    for sid in sessions:
        opened = [e.content for e in context if e.session_id == sid and e.kind == "session_open"]
        target = next((b.target for b in opened if isinstance(b, SessionOpenBody)), "") or "?"
        print(f"session {sid or '(none)'}: target {target}")
    if context:
        print("\nsession context:")
        print(timeline(sorted(context, key=lambda entry: entry.seq)))
    print("\nentries:")
    for entry in entries:
        print(timeline([entry]))
        print(f"    body: {canonical_json(entry.body)}")
        print(f"    hash: {entry.entry_hash}")
    return 0


def _status(entries: list[Entry]) -> str:
    """The action's standing, from its latest result or reconcile entry."""
    final = [entry.content for entry in entries if entry.kind in (ResultBody.KIND, ReconcileBody.KIND)]
    if not final:
        has_intent = any(entry.kind == IntentBody.KIND for entry in entries)
        return "intent without a result (in flight, or run recover)" if has_intent else "no intent"
    last = final[-1]
    if isinstance(last, ReconcileBody):
        return f"RECONCILED ({last.verdict or '?'})"
    assert isinstance(last, ResultBody)
    if last.is_outcome(Outcome.UNKNOWN):
        return f"UNKNOWN ({last.reason}): unresolved until reconciled"
    return f"{last.outcome or '?'} ({last.reason})"


def run_verify(args: argparse.Namespace) -> int:
    """Verify every chain; exit 0 when all hold, 1 when one does not, 2 when one cannot be
    read (the worst of these). A chain that is bad or unreadable does not stop the others."""
    chains = _open_existing(args, head_files=True)
    if chains is None:
        return 2
    worst = verified = 0
    for exe in chains.names:
        name = f"executor {exe}: " if exe else ""
        try:
            report = chains.verify(exe)
        except LedgerError as exc:
            print(f"error: {name}{exc}", file=sys.stderr)
            worst = 2
            continue
        if report.ok:
            print(f"{name}ok: {report.count} entries, chain verified; head file: {report.head_file}", flush=True)
            verified += 1
            continue
        worst = max(worst, 1)
        where = f"entry #{report.first_bad_seq}" if report.first_bad_seq else "the head file"
        print(f"{name}BAD at {where}: {report.message}", flush=True)
    if len(chains.names) > 1:
        print(f"{verified} of {len(chains.names)} chains verified")
    return worst


def run_export(args: argparse.Namespace) -> int:
    """Write the (filtered) entries as JSON lines, one entry per line, in seq order."""
    chains = _open_existing(args)
    if chains is None:
        return 2
    try:
        filters = _filters(args)
        if args.output:
            count = 0
            with open(args.output, "w", encoding="utf-8") as out:
                for exe in chains.names:
                    with chains.opened(exe) as ledger:
                        count += _write_jsonl(ledger, filters, out, exe)
            print(f"{count} entries written to {args.output}", file=sys.stderr)
        else:
            for exe in chains.names:
                with chains.opened(exe) as ledger:
                    _write_jsonl(ledger, filters, sys.stdout, exe)
    except (LedgerError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _write_jsonl(ledger: Ledger, filters: dict[str, Any], out: TextIO, executor: str = "") -> int:
    """One chain's entries as JSON lines; those of a PostgreSQL ledger name their executor
    (``"executor"``, beside the stored columns: it is not part of what is hashed)."""
    count = 0
    head = ledger.head()[0]  # a fixed end, even while others append
    for entry in ledger.iter_entries(**filters):
        if entry.seq > head:
            break
        line = entry.to_dict()
        if executor:
            line["executor"] = executor
        out.write(canonical_json(line) + "\n")
        count += 1
    return count


def run_timeline(args: argparse.Namespace) -> int:
    """Print the (filtered) entries as a readable timeline, then a one-line summary."""
    chains = _open_existing(args)
    if chains is None:
        return 2
    try:
        filters = _filters(args)
        found = _merged(chains, lambda exe, ledger: _select(ledger, filters))
    except (LedgerError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if found:
        print(_lines(found))
    actions = {(exe, e.session_id, e.action_id) for exe, e in found if e.action_id}
    sessions = {(exe, e.session_id) for exe, e in found if e.session_id}
    executors = f", {len(chains.names)} executors" if len(chains.names) > 1 else ""
    print(f"-- {len(found)} entries, {len(actions)} actions, {len(sessions)} sessions{executors}")
    return 0
