CREATE TABLE docket_notifications (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    process_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('event', 'created', 'failed', 'repaired', 'removed')),
    event_id INTEGER,
    data TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL
);
CREATE INDEX docket_notifications_ns_idx ON docket_notifications (namespace, seq);
