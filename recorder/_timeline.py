"""A readable timeline of ledger entries: one line per entry.

Used by ``handrail ledger tail``/``timeline`` and by the demo.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ._ledger import Entry, canonical_json

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
    body = entry.body
    if entry.kind == "intent" and isinstance(body.get("params"), Mapping):
        text = _summarize_params(body["params"])
    elif entry.kind == "result":
        text = _summarize_result(body)
    elif entry.kind == "refusal":
        words = [str(body.get(k, "")) for k in ("kind", "ref") if body.get(k)]
        if body.get("name"):
            words.append(json.dumps(body["name"], ensure_ascii=False))
        if body.get("url"):
            words.append(str(body["url"]))
        text = f"REFUSED {body.get('reason', '')} " + " ".join(words)
        text += f": {body.get('message', '')}"
    elif entry.kind == "reconcile":
        text = f"RECONCILED {body.get('verdict', '?')}"
        if body.get("evidence"):
            text += f" evidence={json.dumps(body['evidence'], ensure_ascii=False)}"
    elif entry.kind == "lease_change" and "event" in body:
        rest = {k: v for k, v in body.items() if k not in ("event", "target")}
        text = f"{body['event']} {body.get('target', '')} {_summarize_params(rest)}".strip()
    else:
        text = _summarize_params(body)
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


def _summarize_result(body: Mapping[str, Any]) -> str:
    words = [str(body.get("outcome", "?"))]
    if body.get("reason"):
        words.append(str(body["reason"]))
    if body.get("evidence"):
        words.append(f"evidence={body['evidence']}")
    if "execution_started" in body:
        words.append(f"started={'yes' if body['execution_started'] else 'no'}")
    if body.get("message"):
        words.append(json.dumps(body["message"], ensure_ascii=False))
    return " ".join(words)


def _short(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if " " in value or not value else value
    return canonical_json(value)
