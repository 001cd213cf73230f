"""Ledger entries: as stored (:class:`Entry`), as asked for (:class:`NewEntry`), redaction.

An entry's body is kept as the dict that was hashed (:attr:`Entry.body`), and read through
its typed model (:attr:`Entry.content`, :meth:`Entry.body_as`; see ``_bodies``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, NamedTuple, TypeVar

from handrail._vocabulary import Verdict

from ._bodies import Body, EntryBody, parse_body
from ._chain import canonical_json
from ._errors import LedgerError

__all__ = [
    "LEASE_EVENTS",
    "REDACTED",
    "VERDICTS",
    "Entry",
    "NewEntry",
    "PreparedEntry",
    "PrincipalKind",
    "entry_from_row",
    "prepare",
    "redact",
]

REDACTED = "[REDACTED]"
"""What a secret value is replaced with before it is hashed and stored."""

VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)
"""What a ``reconcile`` entry may say about an UNKNOWN action."""

LEASE_EVENTS = ("acquire", "renew", "takeover", "hand_back", "release", "expire", "revoke")
"""Known ``lease_change`` events. Others are accepted."""

PrincipalKind = Literal["agent", "human", "system"]
_PRINCIPAL_KINDS = frozenset({"agent", "human", "system"})

_SECRET_WORDS = ("password", "token", "secret")
_SECRET_KEYS_FIELD = "_secret_keys"

_B = TypeVar("_B", bound=Body)


def redact(body: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``body`` with secret values replaced by ``"[REDACTED]"``.

    A value is secret when its key (at any depth) contains ``password``, ``token`` or
    ``secret``, or when the key is listed in ``body["_secret_keys"]``. The
    ``_secret_keys`` list itself is dropped.

    Args:
        body: the entry body as given to :meth:`Ledger.append`.
    """
    listed = body.get(_SECRET_KEYS_FIELD, ())
    if isinstance(listed, str):
        listed = (listed,)
    extra = frozenset(str(k) for k in listed)
    return {str(k): _redact_value(str(k), v, extra) for k, v in body.items() if k != _SECRET_KEYS_FIELD}


def _is_secret_key(key: str, extra: frozenset[str]) -> bool:
    lowered = key.lower()
    return key in extra or any(word in lowered for word in _SECRET_WORDS)


def _redact_value(key: str, value: Any, extra: frozenset[str]) -> Any:
    if _is_secret_key(key, extra):
        return REDACTED
    if isinstance(value, Mapping):
        return {str(k): _redact_value(str(k), v, extra) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [
            {str(k): _redact_value(str(k), v, extra) for k, v in item.items()} if isinstance(item, Mapping) else item
            for item in value
        ]
    return value


@dataclass(frozen=True)
class Entry:
    """One ledger entry, as stored.

    Attributes:
        seq: position in the chain, from 1, without gaps.
        ts_ms: wall-clock time of the append, in milliseconds since the epoch.
        kind: ``"intent"``, ``"result"``, ``"lease_change"``, ... (see ``KINDS``).
        session_id: the executor session, or ``""``.
        action_id: the action this entry is about, or ``""``.
        idempotency_key: the agent's idempotency key for the action, or ``""``.
        principal: who caused the entry (an agent id, a person, ``"executor"``).
        principal_kind: ``"agent"``, ``"human"`` or ``"system"``.
        epoch: the control-lease epoch (fencing token) in force.
        body: the redacted body, as hashed. Read it through :attr:`content`.
        prev_hash: the previous entry's hash (64 zeros for the first entry).
        entry_hash: ``sha256(prev_hash || canonical_json(entry without hashes))``.
    """

    seq: int
    ts_ms: int
    kind: str
    session_id: str
    action_id: str
    idempotency_key: str
    principal: str
    principal_kind: str
    epoch: int
    body: dict[str, Any]
    prev_hash: str
    entry_hash: str

    @cached_property
    def content(self) -> EntryBody:
        """The body as the typed model of its kind (:class:`IntentBody`, :class:`ResultBody` ...)."""
        return parse_body(self.kind, self.body)

    def body_as(self, model: type[_B]) -> _B:
        """The body as ``model``, for an entry known to be of that model's kind.

        Example::

            intent = ledger.find_intent_by_key(session_id, key)
            fingerprint = intent.body_as(IntentBody).params.fingerprint

        Raises:
            LedgerError: the entry is of another kind (``INVALID_ARGUMENT``).
        """
        content = self.content
        if not isinstance(content, model):
            raise LedgerError(
                f"entry #{self.seq} is a {self.kind} entry, not {model.KIND}",
                reason="INVALID_ARGUMENT",
            )
        return content

    def hashed_fields(self) -> dict[str, Any]:
        """Return the entry without its two hashes: what ``entry_hash`` covers."""
        return {
            "seq": self.seq,
            "ts_ms": self.ts_ms,
            "kind": self.kind,
            "session_id": self.session_id,
            "action_id": self.action_id,
            "idempotency_key": self.idempotency_key,
            "principal": self.principal,
            "principal_kind": self.principal_kind,
            "epoch": self.epoch,
            "body": self.body,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return every column as a JSON-ready dict."""
        return {**self.hashed_fields(), "prev_hash": self.prev_hash, "entry_hash": self.entry_hash}


@dataclass(frozen=True)
class NewEntry:
    """An entry to append with :meth:`Ledger.append_many`; the fields of :meth:`Ledger.append`.

    ``body`` is a typed body of the entry's kind (:class:`IntentBody` ...) or, for any
    kind, a JSON-serializable mapping stored as given.
    """

    kind: str
    session_id: str = ""
    action_id: str = ""
    idempotency_key: str = ""
    principal: str = ""
    principal_kind: PrincipalKind = "agent"
    epoch: int = 0
    body: Mapping[str, Any] | Body | None = None


class PreparedEntry(NamedTuple):
    """A validated entry waiting for its seq: what a store chains and writes."""

    kind: str
    session_id: str
    action_id: str
    idempotency_key: str
    principal: str
    principal_kind: str
    epoch: int
    body_json: str  # canonical and redacted


def prepare(new: NewEntry) -> PreparedEntry:
    """Validate ``new`` and serialize its body, redacted.

    Raises:
        LedgerError: a bad argument or an unserializable body (``INVALID_ARGUMENT``).
    """
    if not new.kind:
        raise LedgerError("kind must not be empty", reason="INVALID_ARGUMENT")
    for field in _TEXT_FIELDS:
        _check_text(field, getattr(new, field))
    if new.principal_kind not in _PRINCIPAL_KINDS:
        raise LedgerError(
            f"principal_kind must be one of agent, human, system; got {new.principal_kind!r}",
            reason="INVALID_ARGUMENT",
        )
    if isinstance(new.epoch, bool) or not isinstance(new.epoch, int):
        raise LedgerError(f"epoch must be an int, got {new.epoch!r}", reason="INVALID_ARGUMENT")
    body = new.body
    if isinstance(body, Body):
        if new.kind != body.KIND:
            raise LedgerError(
                f"a {type(body).__name__} is the body of a {body.KIND} entry, not of a {new.kind} entry",
                reason="INVALID_ARGUMENT",
            )
        body = body.to_body()
    try:
        body_json = canonical_json(redact(body or {}))
    except (TypeError, ValueError) as exc:
        raise LedgerError(f"body is not JSON-serializable: {exc}", reason="INVALID_ARGUMENT") from exc
    _check_text("body", body_json)
    return PreparedEntry(
        new.kind,
        new.session_id,
        new.action_id,
        new.idempotency_key,
        new.principal,
        new.principal_kind,
        new.epoch,
        body_json,
    )


_TEXT_FIELDS = ("kind", "session_id", "action_id", "idempotency_key", "principal")


def _check_text(field: str, text: object) -> None:
    """Refuse what cannot be hashed and stored as UTF-8: not a str, or a lone surrogate
    (from bytes that were not UTF-8 decoded with ``surrogateescape``)."""
    if not isinstance(text, str):
        raise LedgerError(f"{field} must be a str, got {type(text).__name__}", reason="INVALID_ARGUMENT")
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LedgerError(
            f"{field} holds {text[exc.start : exc.end]!a}, a lone surrogate: not text that UTF-8 can store",
            reason="INVALID_ARGUMENT",
        ) from None


def entry_from_row(row: Sequence[Any]) -> Entry:
    """An entry from its stored columns, in the order of ``Entry``'s fields."""
    return Entry(
        seq=row[0],
        ts_ms=row[1],
        kind=row[2],
        session_id=row[3],
        action_id=row[4],
        idempotency_key=row[5],
        principal=row[6],
        principal_kind=row[7],
        epoch=row[8],
        body=json.loads(row[9]),
        prev_hash=row[10],
        entry_hash=row[11],
    )
