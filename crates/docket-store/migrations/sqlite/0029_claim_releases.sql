-- Claims handed back by their worker: see the PostgreSQL migration 0031.
CREATE TABLE docket_claim_releases (
    nonce TEXT PRIMARY KEY,
    released_at INTEGER NOT NULL
) WITHOUT ROWID;
