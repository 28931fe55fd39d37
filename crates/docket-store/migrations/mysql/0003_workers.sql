-- Workers' reports (see PostgreSQL's 0018).
CREATE TABLE docket_workers (
    name VARCHAR(512) NOT NULL PRIMARY KEY,
    report JSON NOT NULL,
    reported_at DATETIME(6) NOT NULL,
    interval_ms BIGINT NOT NULL CHECK (interval_ms > 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
