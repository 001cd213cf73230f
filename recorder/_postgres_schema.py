"""The PostgreSQL ledger's schema, as the steps :class:`~._postgres.PgLedgerStore` applies
in order, each recorded in ``ledger_migrations`` (a step is never changed once released:
a new one is added)."""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "create ledger entries and heads",
        """
        CREATE TABLE ledger_entries (
            executor_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            ts_ms BIGINT NOT NULL,
            kind TEXT NOT NULL,
            session_id TEXT NOT NULL DEFAULT '',
            action_id TEXT NOT NULL DEFAULT '',
            idempotency_key TEXT NOT NULL DEFAULT '',
            principal TEXT NOT NULL DEFAULT '',
            principal_kind TEXT NOT NULL CHECK (principal_kind IN ('agent', 'human', 'system')),
            epoch BIGINT NOT NULL DEFAULT 0,
            body TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            entry_hash TEXT NOT NULL,
            PRIMARY KEY (executor_id, seq)
        );
        CREATE INDEX ledger_by_key ON ledger_entries (executor_id, session_id, idempotency_key, kind);
        CREATE INDEX ledger_by_action ON ledger_entries (executor_id, action_id);
        CREATE INDEX ledger_by_kind ON ledger_entries (executor_id, kind, session_id, action_id);
        CREATE INDEX ledger_by_time ON ledger_entries (ts_ms);
        CREATE TABLE ledger_heads (
            executor_id TEXT PRIMARY KEY,
            head_seq BIGINT NOT NULL,
            head_hash TEXT NOT NULL
        );
        CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'ledger entries are append-only: % refused', TG_OP;
        END $$;
        CREATE TRIGGER ledger_entries_no_change BEFORE UPDATE OR DELETE ON ledger_entries
            FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();
        CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries
            FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_append_only();
        """,
    ),
    (
        "ledger heads only move forward",
        """
        CREATE FUNCTION ledger_heads_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'UPDATE' AND NEW.executor_id = OLD.executor_id AND (NEW.head_seq > OLD.head_seq
                    OR (NEW.head_seq = OLD.head_seq AND NEW.head_hash = OLD.head_hash)) THEN
                RETURN NEW;
            END IF;
            RAISE EXCEPTION 'ledger heads only move forward: % refused', TG_OP;
        END $$;
        CREATE TRIGGER ledger_heads_forward BEFORE UPDATE OR DELETE ON ledger_heads
            FOR EACH ROW EXECUTE FUNCTION ledger_heads_forward_only();
        CREATE TRIGGER ledger_heads_no_truncate BEFORE TRUNCATE ON ledger_heads
            FOR EACH STATEMENT EXECUTE FUNCTION ledger_heads_forward_only();
        """,
    ),
)
