"""A readable timeline of ledger entries: one line per entry.

Used by ``handrail ledger tail``/``timeline`` and by the demo.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ._bodies import (
    IntentBody,
    LeaseChangeBody,
    NavigationBody,
    ReconcileBody,
    RefusalBody,
    RequestBody,
    ResultBody,
)
from ._chain import canonical_json
from ._entry import Entry

__all__ = ["timeline"]

_VERB_KEYS = ("action", "verb", "op", "type")
_TARGET_KEYS = ("ref", "target", "element", "selector")
_QUOTED_KEYS = ("name", "label", "text", "value", "url")
_MAX_SUMMARY = 120


# Bookkeeping that makes a timeline line long without telling a reader anything.
_HIDDEN_KEYS = frozenset({"fingerprint", "decision_id", "observation_id"})


def timeline(entries: Iterable[Entry]) -> str:
    """Render entries as readable lines, one per entry.

    Example line::

        12:03:04.123  #17 intent   s=abc act=a1 key=k1 agent:demo-agent e=3  click e12 "Turn off auto-renew"

    Times are UTC. Results are summarized by outcome, reason and evidence.

    Args:
        entries: entries in the order to print them.
    """
    return "\n".join(_timeline_line(entry) for entry in entries)


def _timeline_line(entry: Entry) -> str:
    when = datetime.fromtimestamp(entry.ts_ms / 1000, tz=UTC)
    parts = [f"{when:%H:%M:%S}.{entry.ts_ms % 1000:03d} ", f"#{entry.seq}", f"{entry.kind:<8}"]
    if entry.session_id:
        parts.append(f"s={entry.session_id}")
    if entry.action_id:
        parts.append(f"act={entry.action_id}")
    if entry.idempotency_key:
        parts.append(f"key={entry.idempotency_key}")
    if entry.principal:
        parts.append(f"{entry.principal_kind}:{entry.principal}")
    parts.append(f"e={entry.epoch}")
    summary = _summarize(entry)
    line = " ".join(parts)
    return f"{line}  {summary}" if summary else line


def _summarize(entry: Entry) -> str:
    body = entry.content
    if isinstance(body, IntentBody):
        text = _summarize_params(body.params.to_dict() or entry.body)
    elif isinstance(body, ResultBody):
        text = _summarize_result(body)
    elif isinstance(body, RefusalBody):
        words = [w for w in (body.kind, body.ref) if w]
        if body.name:
            words.append(json.dumps(body.name, ensure_ascii=False))
        if body.url:
            words.append(body.url)
        text = f"REFUSED {body.reason} " + " ".join(words) + f": {body.message}"
    elif isinstance(body, ReconcileBody):
        text = f"RECONCILED {body.verdict or '?'}"
        if body.evidence:
            text += f" evidence={json.dumps(body.evidence, ensure_ascii=False)}"
    elif isinstance(body, NavigationBody):
        verdict = ("READ" if body.read else "LOADED") if body.allowed else f"BLOCKED {body.reason}"
        text = f"{verdict} {body.cause} {body.method} {body.url} as {body.verb or '?'}: {body.message}"
    elif isinstance(body, RequestBody):
        got = f"answered {body.status}" if body.status else f"no response ({body.failure or 'none yet'})"
        text = f"REQUEST {body.method} {body.url} {got}: {body.message}"
    elif isinstance(body, LeaseChangeBody) and body.event:
        detail = body.detail.to_dict()
        text = f"{body.event} {body.target} {_summarize_params({'detail': detail} if detail else {})}".strip()
    else:
        text = _summarize_params(entry.body)
    if len(text) > _MAX_SUMMARY:
        text = text[: _MAX_SUMMARY - 1] + "…"
    return text


def _summarize_params(params: Mapping[str, Any]) -> str:
    words: list[str] = []
    used: set[str] = set()
    for keys, quoted in ((_VERB_KEYS, False), (_TARGET_KEYS, False), (_QUOTED_KEYS, True)):
        for key in keys:
            value = params.get(key)
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                words.append(json.dumps(value, ensure_ascii=False) if quoted else str(value))
                used.add(key)
                break
    for key, value in params.items():
        if key not in used and key not in _HIDDEN_KEYS:
            words.append(f"{key}={_short(value)}")
    return " ".join(words)


def _summarize_result(body: ResultBody) -> str:
    words = [body.outcome or "?"]
    if body.reason:
        words.append(body.reason)
    if body.extra.amends is not None:
        words.append(f"amends=#{body.extra.amends}")
    if body.evidence:
        words.append(f"evidence={body.evidence}")
    words.append(f"started={'yes' if body.execution_started else 'no'}")
    if body.message:
        words.append(json.dumps(body.message, ensure_ascii=False))
    return " ".join(words)


def _short(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if " " in value or not value else value
    return canonical_json(value)
