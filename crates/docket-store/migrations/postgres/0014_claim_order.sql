-- Claim order: after priority, tasks on fewer attempts first (node-daemons' `attempts ASC`), so a
-- storm of retries does not starve first attempts; then run_at, id.
DROP INDEX docket_tasks_claim_idx;
CREATE INDEX docket_tasks_claim_idx ON docket_tasks (queue, priority DESC, attempt, run_at, id)
    WHERE state = 'available';
