-- Operator actions (cancel, retry, run now, pause/resume, repair, schedules): who, when, what.
CREATE TABLE docket_audit (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    target text NOT NULL,
    detail jsonb
);
CREATE INDEX docket_audit_at ON docket_audit (at);
-- Per-minute throughput of the dashboard reads finished tasks by finish time.
CREATE INDEX docket_tasks_finished_at ON docket_tasks (finished_at) WHERE finished_at IS NOT NULL;
