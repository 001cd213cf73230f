"""The SQLite store's tables: their columns, and rows to plain types and back.

The tables are made by the recorded migrations of :mod:`._sqlite_migrations`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from json.encoder import encode_basestring_ascii
from typing import Any

from handrail.authz._models import (
    ApprovalInfo,
    CheckInput,
    Decision,
    DecisionRecord,
    ElementContext,
    GrantInfo,
    LeaseInfo,
)

DB_NAME = "authz.sqlite"

#: Grants that ended longer ago than this are not loaded into the in-memory index at start-up
#: (a check naming one then reads OUT_OF_SCOPE rather than GRANT_REVOKED/EXPIRED).
ENDED_GRANT_RETENTION_MS = 7 * 24 * 3600_000

GRANT_COLS = (
    "grant_id, principal, target, verbs, origins, expires_at_ms, granted_by, note,"
    " created_at_ms, revoked_at_ms, scope, single_use, task_id, used_at_ms, closed_at_ms"
)
LEASE_COLS = "target, holder_kind, holder, epoch, expires_at_ms, next_holder"
APPROVAL_COLS = (
    "approval_id, principal, target, fingerprint, lease_epoch, status, deadline_ms, action,"
    " grant_id, decided_by, note, created_at_ms, decided_at_ms, used_at_ms, decision_id,"
    " used_by_decision_id"
)
DECISION_COLS = "decision_id, at_ms, principal, target, reason, record"
SCOPE_FIELDS = (
    "path_globs",
    "role_patterns",
    "name_patterns",
    "window_class_patterns",
    "window_title_patterns",
    "require_approval_verbs",
)


@functools.lru_cache(maxsize=256)
def hash_token(token: str) -> str:
    """The at-rest form of a bearer token: its sha256, hex.

    Every check hashes its caller's token, and OpenSSL's sha256 costs ~10 µs when its
    code is cold (between the calls of a sidecar that is not saturated), so the digests of
    the last 256 tokens are kept: a pure function of the token, so a revoked or rotated
    token still fails on the very next call (that is judged by the digest's row).
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --- rows ---------------------------------------------------------------------------------------


def grant_row(row: tuple[Any, ...]) -> GrantInfo:
    (gid, principal, target, verbs, origins, expires, by, note, created, revoked) = row[:10]
    scope_json, single_use, task_id, used, closed = row[10:]
    scope: dict[str, Any] = json.loads(str(scope_json))
    return GrantInfo(
        grant_id=str(gid),
        principal=str(principal),
        target=str(target),
        verbs=tuple(json.loads(str(verbs))),
        origins=tuple(json.loads(str(origins))),
        expires_at_ms=int(expires),
        granted_by=str(by),
        note=str(note),
        created_at_ms=int(created),
        revoked=revoked is not None,
        revoked_at_ms=int(revoked or 0),
        single_use=bool(single_use),
        task_id=str(task_id),
        used_at_ms=int(used or 0),
        closed_at_ms=int(closed or 0),
        allow_password_input=bool(scope.get("allow_password_input", False)),
        idempotency_header=bool(scope.get("idempotency_header", False)),
        approval_timeout_ms=int(scope.get("approval_timeout_ms", 0)),
        **{f: tuple(scope.get(f, ())) for f in SCOPE_FIELDS},
    )


def grant_scope_json(grant: GrantInfo) -> str:
    scope: dict[str, Any] = {f: list(getattr(grant, f)) for f in SCOPE_FIELDS}
    scope["allow_password_input"] = grant.allow_password_input
    if grant.idempotency_header:
        scope["idempotency_header"] = True
    scope["approval_timeout_ms"] = grant.approval_timeout_ms
    return json.dumps(scope)


def lease_row(row: tuple[Any, ...]) -> LeaseInfo:
    target, kind, holder, epoch, expires, next_holder = row
    return LeaseInfo(str(target), str(kind), str(holder), int(epoch), int(expires), str(next_holder))


def lease_dict(lease: LeaseInfo) -> dict[str, Any]:
    return {
        "target": lease.target,
        "holder_kind": lease.holder_kind,
        "holder": lease.holder,
        "epoch": lease.epoch,
        "expires_at_ms": lease.expires_at_ms,
        "next_holder": lease.next_holder,
    }


def approval_row(row: tuple[Any, ...]) -> ApprovalInfo:
    (aid, principal, target, fp, epoch, status, deadline, action, gid) = row[:9]
    by, note, created, decided, used, decision_id, used_by = row[9:]
    details: dict[str, Any] = json.loads(str(action))
    policies = tuple(details.pop("policies", ()))
    return ApprovalInfo(
        approval_id=str(aid),
        principal=str(principal),
        target=str(target),
        fingerprint=str(fp),
        status=str(status),
        deadline_ms=int(deadline),
        lease_epoch=int(epoch),
        grant_id=str(gid),
        policies=policies,
        decided_by=str(by),
        note=str(note),
        created_at_ms=int(created),
        decided_at_ms=int(decided),
        used_at_ms=int(used),
        decision_id=str(decision_id),
        used_by_decision_id=str(used_by),
        **{k: str(v) for k, v in details.items()},
    )


APPROVAL_ACTION_FIELDS = (
    "verb",
    "url",
    "element_role",
    "element_name",
    "window_class",
    "window_title",
    "observation_id",
    "action_id",
)


def decision_row(record: DecisionRecord) -> tuple[Any, ...]:
    """The decision_log row of ``record``; its text is ``json.dumps(decision_parts(record))``,
    written out field by field (twice as fast: it is on the path of every check)."""
    return fields_row(decision_fields(record))


def decision_fields(record: DecisionRecord) -> tuple[Any, ...]:
    """What :func:`fields_row` needs of ``record``: a flat tuple of strings, integers,
    booleans, tuples of strings and None, which ``marshal`` writes in a microsecond (the
    journal holds it; the JSON is made when it is flushed, off the request path)."""
    r, d, lease, c = record.request, record.decision, record.lease, record.request.context
    return (
        record.decision_id,
        record.at_ms,
        record.caller,
        r.principal,
        r.target,
        r.lease_epoch,
        r.verb,
        r.url,
        r.element_role,
        r.element_name,
        r.window_class,
        r.window_title,
        r.password_field,
        r.action_id,
        r.fingerprint,
        r.observation_id,
        d.reason,
        d.allow,
        d.message,
        d.policies,
        d.grant_id,
        d.lease_epoch,
        d.approval_id,
        d.grant_consumed,
        d.shadow_policies,
        None
        if lease is None
        else (lease.target, lease.holder_kind, lease.holder, lease.epoch, lease.expires_at_ms, lease.next_holder),
        record.grants_considered,
        # the element context, written only when there is one (or the document-load flag)
        (c.dialog_title, c.form_name, c.heading, c.description, c.visible_text, r.document_load)
        if c or r.document_load
        else None,
    )


def plain(value: Any) -> Any:
    """``value`` (a :func:`decision_fields` tuple, or one of its items) with every ``str``
    and ``int`` subclass (an enum member) as the plain value ``marshal`` writes, and lists
    as tuples.

    Raises:
        TypeError: something that is not a string, an integer, a boolean, None or a
            sequence of them.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, tuple | list):
        return tuple(plain(v) for v in value)
    raise TypeError(f"a decision field cannot be {type(value).__name__}")


def fields_row(fields: tuple[Any, ...]) -> tuple[Any, ...]:
    """The decision_log row of a decision's :func:`decision_fields` (as the journal gives
    them back: ``marshal`` keeps tuples as tuples)."""
    (decision_id, at_ms, caller, principal, target, epoch, verb, url, role, name, window_class) = fields[:11]
    (window_title, password, action_id, fingerprint, observation_id, reason, allow, message) = fields[11:19]
    (policies, grant_id, current_epoch, approval_id, consumed, shadow, lease, considered, context) = fields[19:]
    seq = seq_of(decision_id)
    lease_text = (
        "null"
        if lease is None
        else f'{{"target": {_q(lease[0])}, "holder_kind": {_q(lease[1])}, '
        f'"holder": {_q(lease[2])}, "epoch": {lease[3]:d}, '
        f'"expires_at_ms": {lease[4]:d}, "next_holder": {_q(lease[5])}}}'
    )
    text = (
        f"[{'null' if seq is None else seq}, {_q(decision_id)}, {at_ms:d}, "
        f"{_q(principal)}, {_q(target)}, {_q(reason)}, "
        f'{{"caller": {_q(caller)}, "lease_epoch": {epoch:d}, "verb": {_q(verb)}, '
        f'"url": {_q(url)}, "element_role": {_q(role)}, '
        f'"element_name": {_q(name)}, "window_class": {_q(window_class)}, '
        f'"window_title": {_q(window_title)}, "password_field": {_BOOL[password]}, '
        f'"action_id": {_q(action_id)}, "fingerprint": {_q(fingerprint)}, '
        f'"observation_id": {_q(observation_id)}, "allow": {_BOOL[allow]}, '
        f'"message": {_q(message)}, "policies": {_strings(policies)}, '
        f'"grant_id": {_q(grant_id)}, "current_epoch": {current_epoch:d}, '
        f'"approval_id": {_q(approval_id)}, "grant_consumed": {_BOOL[consumed]}, '
        f'"shadow_policies": {_strings(shadow)}, "lease": {lease_text}, '
        f'"grants_considered": {_strings(considered)}'
        f"{'' if context is None else _context_text(context)}}}]"
    )
    return (seq, decision_id, at_ms, principal, target, reason, text)


_q = encode_basestring_ascii  # a JSON string literal, as json.dumps writes it
_BOOL = {False: "false", True: "true"}


def _context_text(context: tuple[Any, ...]) -> str:
    """The element context and the document-load flag of a check (its
    :func:`decision_fields` entry)."""
    dialog_title, form_name, heading, description, visible_text, document_load = context
    return (
        f', "dialog_title": {_q(dialog_title)}, "form_name": {_q(form_name)}, '
        f'"heading": {_q(heading)}, "description": {_q(description)}, '
        f'"document_load": {_BOOL[document_load]}' + (f', "visible_text": {_q(visible_text)}' if visible_text else "")
    )


def _strings(values: tuple[str, ...] | list[str]) -> str:
    return f"[{', '.join(map(_q, values))}]" if values else "[]"


def as_row(parts: tuple[Any, ...] | list[Any], text: str) -> tuple[Any, ...]:
    """A decision_log row: the indexed columns, and ``text``, the JSON of all the parts
    (the very line the journal holds, so moving it into SQLite encodes nothing again)."""
    return (*parts[:6], text)


def decision_parts(record: DecisionRecord) -> tuple[Any, ...]:
    """The decision log's record of a decision: ``[seq, id, at_ms, principal, target, reason,
    body]``, stored as JSON (:func:`decision_row` writes the same text faster)."""
    r, d = record.request, record.decision
    body = {
        "caller": record.caller,
        "lease_epoch": r.lease_epoch,
        "verb": r.verb,
        "url": r.url,
        "element_role": r.element_role,
        "element_name": r.element_name,
        "window_class": r.window_class,
        "window_title": r.window_title,
        "password_field": r.password_field,
        "action_id": r.action_id,
        "fingerprint": r.fingerprint,
        "observation_id": r.observation_id,
        "allow": d.allow,
        "message": d.message,
        "policies": d.policies,
        "grant_id": d.grant_id,
        "current_epoch": d.lease_epoch,
        "approval_id": d.approval_id,
        "grant_consumed": d.grant_consumed,
        "shadow_policies": d.shadow_policies,
        "lease": None if record.lease is None else lease_dict(record.lease),
        "grants_considered": record.grants_considered,
    }
    if r.context or r.document_load:
        body.update(
            dialog_title=r.context.dialog_title,
            form_name=r.context.form_name,
            heading=r.context.heading,
            description=r.context.description,
            document_load=r.document_load,
        )
        if r.context.visible_text:
            body["visible_text"] = r.context.visible_text
    return (
        seq_of(record.decision_id),
        record.decision_id,
        record.at_ms,
        r.principal,
        r.target,
        d.reason,
        body,
    )


def decision_record(row: tuple[Any, ...]) -> DecisionRecord:
    decision_id, at_ms, principal, target, reason, record = row
    loaded = json.loads(str(record))
    # the parts array [seq, id, at, principal, target, reason, body]; a dict body for rows
    # migrated from the first schema
    b: dict[str, Any] = loaded[6] if isinstance(loaded, list) else loaded
    did = str(decision_id)
    lease = b.get("lease")
    return DecisionRecord(
        decision_id=did,
        at_ms=int(at_ms),
        caller=str(b.get("caller", "")),
        request=CheckInput(
            principal=str(principal),
            target=str(target),
            lease_epoch=int(b.get("lease_epoch", 0)),
            verb=str(b.get("verb", "")),
            url=str(b.get("url", "")),
            element_role=str(b.get("element_role", "")),
            element_name=str(b.get("element_name", "")),
            window_class=str(b.get("window_class", "")),
            window_title=str(b.get("window_title", "")),
            password_field=bool(b.get("password_field", False)),
            action_id=str(b.get("action_id", "")),
            fingerprint=str(b.get("fingerprint", "")),
            observation_id=str(b.get("observation_id", "")),
            context=ElementContext(
                str(b.get("dialog_title", "")),
                str(b.get("form_name", "")),
                str(b.get("heading", "")),
                str(b.get("description", "")),
                str(b.get("visible_text", "")),
            ),
            document_load=bool(b.get("document_load", False)),
        ),
        decision=Decision(
            allow=bool(b.get("allow", False)),
            reason=str(reason),
            message=str(b.get("message", "")),
            decision_id=did,
            policies=tuple(b.get("policies", ())),
            grant_id=str(b.get("grant_id", "")),
            lease_epoch=int(b.get("current_epoch", 0)),
            approval_id=str(b.get("approval_id", "")),
            shadow_policies=tuple(b.get("shadow_policies", ())),
            grant_consumed=bool(b.get("grant_consumed", False)),
        ),
        lease=LeaseInfo(**lease) if lease else None,
        grants_considered=tuple(b.get("grants_considered", ())),
    )


SEQ_DIGITS = 12
_HEX_DIGITS = "0123456789abcdef"


def seq_of(decision_id: str) -> int | None:
    """The log sequence number a decision id starts with (None for a foreign id)."""
    if len(decision_id) != 32 or decision_id.strip(_HEX_DIGITS):  # not all hex digits (no regex: every check asks)
        return None
    return int(decision_id[:SEQ_DIGITS], 16)


INSERT_DECISION = f"INSERT INTO decision_log (seq, {DECISION_COLS}) VALUES (?,?,?,?,?,?,?)"
INSERT_DECISION_ONCE = INSERT_DECISION.replace("INSERT", "INSERT OR IGNORE", 1)
