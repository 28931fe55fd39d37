-- Batches (issue 26): tasks grouped under one id, with callback tasks enqueued once every member
-- has finished and the batch is sealed. Members carry batch_id. The engine settles a batch in one
-- transaction under its row lock (batches.sql settle_lock): it counts the members, and the rule
-- (docket_core::batch) says which callbacks to enqueue; `fired` records what was enqueued.
CREATE TABLE docket_batches (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text,
    sealed boolean NOT NULL,
    callbacks jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    settled_at timestamptz,
    fired jsonb
);
CREATE INDEX docket_batches_unsettled_idx ON docket_batches (id) WHERE settled_at IS NULL;
-- No default: adding the column rewrites nothing. The partial index holds batch members only,
-- so plain tasks pay nothing for it.
ALTER TABLE docket_tasks ADD COLUMN batch_id bigint;
CREATE INDEX docket_tasks_batch_idx ON docket_tasks (batch_id, state) WHERE batch_id IS NOT NULL;
