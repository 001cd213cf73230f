"""The PostgreSQL schema's history: versioned migrations, each applied once and recorded.

The tables hold what the SQLite store's do, with the same columns where they mean the same
(the rows are read back with :mod:`._sqlite_schema`'s converters), plus what several
replicas over one database need:

* ``leases`` carries the row before its last change (``prev_*``), so that one
  compare-and-set statement can say what it replaced;
* ``changes`` is the Watch change log: every event any replica publishes, with a sequence
  number taken from the one-row ``change_counter`` (its row lock orders the events by
  commit), and a ``dedupe`` key so that an expiry noticed by several replicas is told once;
* ``decision_log`` takes its order from a sequence (decision ids are random here).

A step is never edited once released; a change to the schema is a new step.
"""

from __future__ import annotations

from handrail.authz._pg_db import Migration

#: Grants that ended longer ago than this are not a check's candidates (as the SQLite
#: store's index, which does not load them).
ENDED_GRANT_RETENTION_MS = 7 * 24 * 3600_000

#: How many Watch events the change log keeps for ``since_seq`` replays.
CHANGE_LOG_KEEP = 100_000

GRANT_COLS = (
    "grant_id, principal, target, verbs, origins, expires_at_ms, granted_by, note,"
    " created_at_ms, revoked_at_ms, scope, single_use, task_id, used_at_ms, closed_at_ms"
)
LEASE_COLS = "target, holder_kind, holder, epoch, expires_at_ms, next_holder"
PREV_LEASE_COLS = "target, prev_holder_kind, prev_holder, prev_epoch, prev_expires_at_ms, prev_next_holder"
APPROVAL_COLS = (
    "approval_id, principal, target, fingerprint, lease_epoch, status, deadline_ms, action,"
    " grant_id, decided_by, note, created_at_ms, decided_at_ms, used_at_ms, decision_id,"
    " used_by_decision_id"
)
DECISION_COLS = "decision_id, at_ms, principal, target, reason, record"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial",
        """
        CREATE TABLE principals (
            name TEXT PRIMARY KEY,
            role TEXT NOT NULL,
            token_sha256 TEXT NOT NULL UNIQUE,
            created_at_ms BIGINT NOT NULL
        );
        CREATE TABLE grants (
            grant_id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            target TEXT NOT NULL,
            is_pattern BOOLEAN NOT NULL,
            verbs TEXT NOT NULL,              -- JSON list
            origins TEXT NOT NULL,            -- JSON list
            expires_at_ms BIGINT NOT NULL,
            granted_by TEXT NOT NULL,
            note TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            revoked_at_ms BIGINT,
            scope TEXT NOT NULL,              -- JSON: patterns, approval settings
            single_use BOOLEAN NOT NULL,
            task_id TEXT NOT NULL,
            used_at_ms BIGINT,
            closed_at_ms BIGINT
        );
        CREATE INDEX grants_exact ON grants (principal, target, created_at_ms);
        CREATE INDEX grants_patterns ON grants (principal, created_at_ms) WHERE is_pattern;
        CREATE INDEX grants_task ON grants (task_id) WHERE task_id <> '';
        CREATE INDEX grants_expiring ON grants (expires_at_ms)
            WHERE expires_at_ms > 0 AND revoked_at_ms IS NULL AND used_at_ms IS NULL
              AND closed_at_ms IS NULL;
        CREATE TABLE leases (
            target TEXT PRIMARY KEY,
            holder_kind TEXT NOT NULL,
            holder TEXT NOT NULL,
            epoch BIGINT NOT NULL,
            expires_at_ms BIGINT NOT NULL,
            next_holder TEXT NOT NULL,
            updated_at_ms BIGINT NOT NULL,
            prev_holder_kind TEXT NOT NULL DEFAULT '',
            prev_holder TEXT NOT NULL DEFAULT '',
            prev_epoch BIGINT NOT NULL DEFAULT 0,
            prev_expires_at_ms BIGINT NOT NULL DEFAULT 0,
            prev_next_holder TEXT NOT NULL DEFAULT ''
        );
        CREATE TABLE approvals (
            seq BIGSERIAL UNIQUE,
            approval_id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            target TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            lease_epoch BIGINT NOT NULL,
            status TEXT NOT NULL,
            deadline_ms BIGINT NOT NULL,
            action TEXT NOT NULL,             -- JSON: verb, url, element, window, ids, policies
            grant_id TEXT NOT NULL,
            decided_by TEXT NOT NULL DEFAULT '',
            note TEXT NOT NULL DEFAULT '',
            created_at_ms BIGINT NOT NULL,
            decided_at_ms BIGINT NOT NULL DEFAULT 0,
            used_at_ms BIGINT NOT NULL DEFAULT 0,
            decision_id TEXT NOT NULL,
            used_by_decision_id TEXT NOT NULL DEFAULT ''
        );
        CREATE UNIQUE INDEX approvals_one_pending
            ON approvals (principal, target, fingerprint, lease_epoch) WHERE status = 'PENDING';
        CREATE INDEX approvals_action
            ON approvals (principal, target, fingerprint, lease_epoch, created_at_ms);
        CREATE INDEX approvals_status ON approvals (status, created_at_ms);
        CREATE TABLE decision_log (
            seq BIGSERIAL PRIMARY KEY,
            decision_id TEXT NOT NULL UNIQUE,
            at_ms BIGINT NOT NULL,
            principal TEXT NOT NULL,
            target TEXT NOT NULL,
            reason TEXT NOT NULL,
            record TEXT NOT NULL              -- JSON: request (redacted), decision, lease, grants
        );
        CREATE INDEX decision_log_principal ON decision_log (principal, at_ms);
        CREATE INDEX decision_log_target ON decision_log (target, at_ms);
        CREATE TABLE change_counter (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            seq BIGINT NOT NULL
        );
        -- sequence numbers start at the clock in microseconds, as a SQLite sidecar's do
        INSERT INTO change_counter VALUES (1, (extract(epoch from clock_timestamp()) * 1000000)::bigint);
        CREATE TABLE changes (
            seq BIGINT PRIMARY KEY,
            at_ms BIGINT NOT NULL,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            change TEXT NOT NULL,
            dedupe TEXT UNIQUE,
            event TEXT NOT NULL               -- JSON: the WatchEventInfo without its seq
        );
        """,
    ),
    Migration(
        2,
        "principal expiry and revocation",
        """
        ALTER TABLE principals ADD COLUMN expires_at_ms BIGINT NOT NULL DEFAULT 0;
        ALTER TABLE principals ADD COLUMN revoked_at_ms BIGINT NOT NULL DEFAULT 0;
        """,
    ),
    Migration(
        3,
        "a change to a principal's grants is a change to its row",
        # Every statement that inserts, changes or deletes grants writes the row of each
        # principal whose grants it touched, in the same transaction (the rows locked in
        # name order, so two such statements never deadlock on them; a TRUNCATE writes
        # every principal's): a remembered check snapshot then tells whether any of the
        # agent's grants changed by the agent's row version alone
        # (_pg_grants.still_current), whatever wrote the grants. A grant may name a
        # principal not created yet (an import): creating a principal and writing its
        # grants take the same advisory lock, so the creation waits for a grant write in
        # progress and the write's trigger, after its lock, sees a principal created
        # before it (a helper's review found the race without it). (What turns triggers off,
        # session_replication_role = replica or ALTER TABLE ... DISABLE TRIGGER, is not
        # for a live database: see docs/deploy.md.)
        """
        ALTER TABLE principals ADD COLUMN grants_changed BIGINT NOT NULL DEFAULT 0;
        CREATE FUNCTION handrail_principal_lock(name TEXT) RETURNS void LANGUAGE sql
            SET search_path FROM CURRENT AS $$
            SELECT pg_advisory_xact_lock(hashtext('handrail.principal:' || current_schema()), hashtext(name))
        $$;
        CREATE FUNCTION handrail_grants_changed() RETURNS trigger LANGUAGE plpgsql
            SET search_path FROM CURRENT AS $$
        DECLARE
            names TEXT[];
            one TEXT;
        BEGIN
            IF TG_OP = 'TRUNCATE' THEN  -- no rows to name: every principal's grants changed
                names := ARRAY(SELECT name FROM principals);
            ELSIF TG_OP = 'UPDATE' THEN  -- (a grant's principal never changes; were it to)
                names := ARRAY(SELECT principal FROM changed_grants UNION SELECT principal FROM old_grants);
            ELSE
                names := ARRAY(SELECT DISTINCT principal FROM changed_grants);
            END IF;
            -- Each name's lock first, in name order (as add_grants writes and the rows are
            -- locked below): a principal being created (which takes the same lock) is
            -- then committed before the UPDATE below reads principals, or is created only
            -- after this transaction ends.
            FOR one IN SELECT DISTINCT n FROM unnest(names) AS n ORDER BY n LOOP
                PERFORM handrail_principal_lock(one);
            END LOOP;
            UPDATE principals AS p SET grants_changed = p.grants_changed + 1
            FROM (SELECT name FROM principals WHERE name = ANY(names) ORDER BY name FOR UPDATE) AS locked
            WHERE p.name = locked.name;
            RETURN NULL;
        END $$;
        CREATE FUNCTION handrail_principal_created() RETURNS trigger LANGUAGE plpgsql
            SET search_path FROM CURRENT AS $$
        BEGIN
            PERFORM handrail_principal_lock(NEW.name);
            RETURN NEW;
        END $$;
        CREATE TRIGGER principal_created BEFORE INSERT ON principals
            FOR EACH ROW EXECUTE FUNCTION handrail_principal_created();
        CREATE TRIGGER grants_inserted AFTER INSERT ON grants REFERENCING NEW TABLE AS changed_grants
            FOR EACH STATEMENT EXECUTE FUNCTION handrail_grants_changed();
        CREATE TRIGGER grants_updated AFTER UPDATE ON grants
            REFERENCING OLD TABLE AS old_grants NEW TABLE AS changed_grants
            FOR EACH STATEMENT EXECUTE FUNCTION handrail_grants_changed();
        CREATE TRIGGER grants_deleted AFTER DELETE ON grants REFERENCING OLD TABLE AS changed_grants
            FOR EACH STATEMENT EXECUTE FUNCTION handrail_grants_changed();
        CREATE TRIGGER grants_truncated AFTER TRUNCATE ON grants
            FOR EACH STATEMENT EXECUTE FUNCTION handrail_grants_changed();
        """,
    ),
    Migration(
        4,
        "allows kept for a resend of their check",
        # An allow that consumed a grant or used an approval, inserted in its transaction;
        # the same request sent again, through any replica, gets it (authz/_replay.py).
        """
        CREATE TABLE replays (
            replay_key TEXT PRIMARY KEY,      -- sha256 of the caller and the whole request
            decision_id TEXT NOT NULL,
            grant_id TEXT NOT NULL,
            approval_id TEXT NOT NULL,
            at_ms BIGINT NOT NULL
        );
        CREATE INDEX replays_at ON replays (at_ms);
        """,
    ),
)
