-- Linear backoff (see the PostgreSQL migration of the same number).
ALTER TABLE docket_tasks ADD COLUMN backoff_kind TEXT NOT NULL DEFAULT 'exponential'
    CHECK (backoff_kind IN ('exponential', 'linear'));
