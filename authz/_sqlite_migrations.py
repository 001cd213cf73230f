"""The SQLite schema's history: versioned migrations, each applied once and recorded.

As in sqlite-utils' ``Migrations``: every step has a version and a name; :meth:`Migrations.apply`
runs, in one transaction, the steps the ``migrations`` table does not list yet and records
each one with the time it was applied. A step is never edited once released; a change to the
schema is a new step.
"""

from __future__ import annotations

from typing import NamedTuple

from handrail.authz._sqlite_db import SqliteDatabase


class Migration(NamedTuple):
    """One step of the schema.

    Attributes:
        version: its number; steps run in this order.
        name: what it does, as recorded.
        sql: ``;``-separated statements.
    """

    version: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial",
        """
        CREATE TABLE principals (
            name TEXT PRIMARY KEY,
            role TEXT NOT NULL,
            token_sha256 TEXT NOT NULL UNIQUE,
            created_at_ms INTEGER NOT NULL
        );
        CREATE TABLE grants (
            grant_id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            target TEXT NOT NULL,
            verbs TEXT NOT NULL,          -- JSON list of lowercase verbs
            origins TEXT NOT NULL,        -- JSON list of normalized origins
            expires_at_ms INTEGER NOT NULL,
            granted_by TEXT NOT NULL,
            note TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL,
            revoked_at_ms INTEGER
        );
        CREATE INDEX grants_principal_target ON grants (principal, target, created_at_ms);
        CREATE TABLE leases (
            target TEXT PRIMARY KEY,
            holder_kind TEXT NOT NULL,
            holder TEXT NOT NULL,
            epoch INTEGER NOT NULL,
            expires_at_ms INTEGER NOT NULL,
            next_holder TEXT NOT NULL,
            updated_at_ms INTEGER NOT NULL
        );
        CREATE TABLE decisions (
            decision_id TEXT PRIMARY KEY,
            created_at_ms INTEGER NOT NULL,
            caller TEXT NOT NULL,
            principal TEXT NOT NULL,
            target TEXT NOT NULL,
            lease_epoch INTEGER NOT NULL,
            verb TEXT NOT NULL,
            url TEXT NOT NULL,
            element_role TEXT NOT NULL,
            element_name TEXT NOT NULL,
            window_class TEXT NOT NULL,
            window_title TEXT NOT NULL,
            password_field INTEGER NOT NULL,
            action_id TEXT NOT NULL,
            allow INTEGER NOT NULL,
            reason TEXT NOT NULL,
            message TEXT NOT NULL,
            policies TEXT NOT NULL,       -- JSON list of policy @ids
            grant_id TEXT NOT NULL,
            current_epoch INTEGER NOT NULL
        );
        CREATE INDEX decisions_target_time ON decisions (target, created_at_ms);
        """,
    ),
    Migration(
        2,
        "scopes, approvals, decision details",
        """
        ALTER TABLE grants ADD COLUMN scope TEXT NOT NULL DEFAULT '{}';  -- JSON: patterns ...
        ALTER TABLE grants ADD COLUMN single_use INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE grants ADD COLUMN task_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE grants ADD COLUMN used_at_ms INTEGER;
        ALTER TABLE grants ADD COLUMN closed_at_ms INTEGER;
        CREATE INDEX grants_task ON grants (task_id) WHERE task_id != '';
        CREATE TABLE approvals (
            approval_id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            target TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            lease_epoch INTEGER NOT NULL,
            status TEXT NOT NULL,
            deadline_ms INTEGER NOT NULL,
            action TEXT NOT NULL,         -- JSON: verb, url, element, window, ids, policies
            grant_id TEXT NOT NULL,
            decided_by TEXT NOT NULL DEFAULT '',
            note TEXT NOT NULL DEFAULT '',
            created_at_ms INTEGER NOT NULL,
            decided_at_ms INTEGER NOT NULL DEFAULT 0,
            used_at_ms INTEGER NOT NULL DEFAULT 0,
            decision_id TEXT NOT NULL,
            used_by_decision_id TEXT NOT NULL DEFAULT ''
        );
        CREATE UNIQUE INDEX approvals_one_pending
            ON approvals (principal, target, fingerprint, lease_epoch) WHERE status = 'PENDING';
        CREATE INDEX approvals_action
            ON approvals (principal, target, fingerprint, lease_epoch, created_at_ms);
        CREATE INDEX approvals_status ON approvals (status, created_at_ms);
        CREATE TABLE decision_log (
            seq INTEGER PRIMARY KEY,      -- the first 12 hex digits of a new decision_id
            decision_id TEXT NOT NULL,
            at_ms INTEGER NOT NULL,
            principal TEXT NOT NULL,
            target TEXT NOT NULL,
            reason TEXT NOT NULL,
            record TEXT NOT NULL          -- JSON: request (redacted), decision, lease, grants
        );
        CREATE INDEX decision_log_principal ON decision_log (principal, at_ms);
        INSERT INTO decision_log (decision_id, at_ms, principal, target, reason, record)
            SELECT decision_id, created_at_ms, principal, target, reason, json_object(
                'caller', caller, 'lease_epoch', lease_epoch, 'verb', verb, 'url', url,
                'element_role', element_role, 'element_name', element_name,
                'window_class', window_class, 'window_title', window_title,
                'password_field', password_field, 'action_id', action_id, 'allow', allow,
                'message', message, 'policies', json(policies), 'grant_id', grant_id,
                'current_epoch', current_epoch)
            FROM decisions ORDER BY created_at_ms, rowid;
        DROP TABLE decisions;
        """,
    ),
    Migration(
        3,
        "principal expiry and revocation",
        """
        ALTER TABLE principals ADD COLUMN expires_at_ms INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE principals ADD COLUMN revoked_at_ms INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE principals_version (v INTEGER NOT NULL);  -- bumped by every change
        INSERT INTO principals_version (v) VALUES (0);
        """,
    ),
    Migration(
        4,
        "how far each decision journal is flushed",
        """
        -- written with each flush: a replay after a crash skips what was stored (a prune
        -- may have deleted it since)
        CREATE TABLE journal_flushed (journal TEXT PRIMARY KEY, flushed_to INTEGER NOT NULL);
        """,
    ),
    Migration(
        5,
        "allows kept for a resend of their check",
        """
        -- an allow that consumed a grant or used an approval, written in its transaction;
        -- the same request sent again gets it (authz/_replay.py)
        CREATE TABLE replays (
            replay_key TEXT PRIMARY KEY,  -- sha256 of the caller and the whole request
            decision_id TEXT NOT NULL,
            grant_id TEXT NOT NULL,
            approval_id TEXT NOT NULL,
            at_ms INTEGER NOT NULL
        );
        CREATE INDEX replays_at ON replays (at_ms);
        """,
    ),
)


class Migrations:
    """The recorded migrations of one database.

    Args:
        steps: every step, oldest first (default: the authz schema's).
    """

    def __init__(self, steps: tuple[Migration, ...] = MIGRATIONS) -> None:
        self.steps = steps

    def applied(self, db: SqliteDatabase) -> list[int]:
        """The versions the database records as applied, in order."""
        rows = db.reader().execute("SELECT version FROM migrations ORDER BY version")
        return [int(r[0]) for r in rows]

    def apply(self, db: SqliteDatabase) -> list[int]:
        """Apply the steps not yet recorded, in one transaction; return their versions."""
        applied: list[int] = []
        with db.atomic() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM migrations")}
            for version, name, sql in self.steps:
                if version in done:
                    continue
                for statement in sql.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO migrations (version, name, applied_at_ms) VALUES (?, ?, ?)",
                    (version, name, db.now_ms()),
                )
                applied.append(version)
        return applied
