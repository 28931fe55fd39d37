-- Workers' reports (see the PostgreSQL migration of the same number). µs since the epoch.
CREATE TABLE docket_workers (
    name TEXT PRIMARY KEY,
    report TEXT NOT NULL,
    reported_at INTEGER NOT NULL,
    interval_ms INTEGER NOT NULL CHECK (interval_ms > 0)
);
