-- Schedules: a task template fired on a repeat interval or a cron expression. next_run_at is
-- the occurrence fired next; a node fires it by moving next_run_at (compare-and-set) in the
-- same transaction as the task insert, so each occurrence is enqueued exactly once.
CREATE TABLE docket_schedules (
    name text PRIMARY KEY,
    spec jsonb NOT NULL,
    paused boolean NOT NULL DEFAULT false,
    next_run_at timestamptz NOT NULL,
    last_run_at timestamptz,
    last_task_id bigint,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX docket_schedules_due ON docket_schedules (next_run_at) WHERE NOT paused;
