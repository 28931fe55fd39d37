-- API tokens (see the PostgreSQL migration of the same number). Times in µs since the epoch.
CREATE TABLE docket_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    scopes TEXT NOT NULL,
    queues TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER,
    last_used_at INTEGER
);
CREATE UNIQUE INDEX docket_tokens_name ON docket_tokens (name) WHERE revoked_at IS NULL;
