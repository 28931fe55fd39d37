-- Claim order (see the PostgreSQL migration of the same number).
DROP INDEX docket_tasks_claim_idx;
CREATE INDEX docket_tasks_claim_idx ON docket_tasks (queue, priority DESC, attempt, run_at, id)
    WHERE state = 'available';
