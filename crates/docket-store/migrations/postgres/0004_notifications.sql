-- Outbox of process notifications (events and lifecycle changes), written in the transaction that
-- makes the change: a rolled-back change publishes nothing. Writers take a transaction advisory
-- lock before inserting, so seq order is commit order and a reader resuming after seq N never
-- skips a row that commits later.
CREATE TABLE docket_notifications (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace text NOT NULL,
    process_id text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('event', 'created', 'failed', 'repaired', 'removed')),
    event_id bigint,
    data jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL
);
CREATE INDEX docket_notifications_ns_idx ON docket_notifications (namespace, seq);
