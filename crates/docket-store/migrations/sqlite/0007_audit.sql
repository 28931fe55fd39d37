-- Operator actions (see the PostgreSQL migration of the same number).
CREATE TABLE docket_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX docket_audit_at ON docket_audit (at);
CREATE INDEX docket_tasks_finished_at ON docket_tasks (finished_at) WHERE finished_at IS NOT NULL;
