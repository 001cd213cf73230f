"""The hash chain, the one way the ledger hashes and the ledger's clock.

Every entry carries ``entry_hash = sha256(prev_hash || canonical_json(entry))`` where the
hashed entry is every column except the two hashes, and the first entry's ``prev_hash`` is
:data:`GENESIS_HASH`. This module is the bottom of the recorder: the writer, the stores,
verification and the head file all hash through it, so the format is defined once.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any

__all__ = ["GENESIS_HASH", "canonical_json", "entry_hash", "hash_columns", "now_ms"]

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first entry."""


def canonical_json(obj: Any) -> str:
    """Serialize ``obj`` the one way the ledger hashes it: sorted keys, no spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def entry_hash(prev_hash: str, fields: Mapping[str, Any]) -> str:
    """Compute an entry's hash the way the specification states it.

    Args:
        prev_hash: the previous entry's hash (hex).
        fields: the entry without ``prev_hash`` and ``entry_hash``.

    Returns:
        ``sha256(prev_hash || canonical_json(fields))`` as hex.
    """
    return hashlib.sha256((prev_hash + canonical_json(dict(fields))).encode()).hexdigest()


def hash_columns(
    prev_hash: str,
    seq: int,
    ts_ms: int,
    kind: str,
    session_id: str,
    action_id: str,
    idempotency_key: str,
    principal: str,
    principal_kind: str,
    epoch: int,
    body_json: str,
) -> str:
    """:func:`entry_hash` of an entry given as its stored columns, without parsing the body.

    Builds ``canonical_json(entry without hashes)`` by hand, keys in sorted order, so that
    appending and verifying need not parse and re-serialize each body: ``body_json`` is
    stored canonical.
    """
    payload = (
        f'{{"action_id":{encode_basestring(action_id)},"body":{body_json},"epoch":{epoch},'
        f'"idempotency_key":{encode_basestring(idempotency_key)},'
        f'"kind":{encode_basestring(kind)},"principal":{encode_basestring(principal)},'
        f'"principal_kind":{encode_basestring(principal_kind)},"seq":{seq},'
        f'"session_id":{encode_basestring(session_id)},"ts_ms":{ts_ms}}}'
    )
    return hashlib.sha256((prev_hash + payload).encode()).hexdigest()


def now_ms() -> int:
    """The ledger's clock: wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000
