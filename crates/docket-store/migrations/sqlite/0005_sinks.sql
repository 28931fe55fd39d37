CREATE TABLE docket_sinks (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until INTEGER
);
