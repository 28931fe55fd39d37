-- Claims handed back by their worker: see the PostgreSQL migration 0031.
CREATE TABLE docket_claim_releases (
    nonce CHAR(32) NOT NULL PRIMARY KEY,
    released_at DATETIME(6) NOT NULL,
    KEY docket_claim_releases_at_idx (released_at)
);
