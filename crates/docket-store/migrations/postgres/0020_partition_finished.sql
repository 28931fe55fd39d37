-- Finished tasks leave the hot table (issue 13, asyncflow's 5M-row table split done with native
-- partitions). docket_tasks becomes a table partitioned by state:
--   docket_tasks_live  scheduled, available, running, retryable: what claims, heartbeats,
--                      completions and the scheduler touch; its heap and indexes stay as small
--                      as the backlog, however much history there is;
--   docket_tasks_done  completed, discarded, cancelled: written once when a task finishes (the
--                      UPDATE that finishes a task moves the row), read by lookups and lists,
--                      pruned by retention.
-- Every statement keeps naming docket_tasks; PostgreSQL routes rows and prunes partitions. The
-- cost: an id is unique through the sequence and each partition's primary key, not one global
-- index (a partitioned table's key would have to hold the partition column), and a statement
-- that reaches a row another transaction has just moved between partitions fails with SQLSTATE
-- 40001, which the store retries.
ALTER TABLE docket_tasks RENAME TO docket_tasks_old;

CREATE SEQUENCE docket_tasks_seq;
-- The old identity's next value, not max(id) + 1: ids of pruned tasks are never handed out
-- again (and a fresh database still starts at 1).
SELECT setval('docket_tasks_seq', GREATEST(
    (SELECT COALESCE(max(id), 0) + 1 FROM docket_tasks_old),
    (SELECT last_value + CASE WHEN is_called THEN 1 ELSE 0 END FROM docket_tasks_id_seq)), false);

CREATE TABLE docket_tasks (LIKE docket_tasks_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY LIST (state);
ALTER TABLE docket_tasks ALTER COLUMN id SET DEFAULT nextval('docket_tasks_seq');
CREATE TABLE docket_tasks_live PARTITION OF docket_tasks
    FOR VALUES IN ('scheduled', 'available', 'running', 'retryable');
CREATE TABLE docket_tasks_done PARTITION OF docket_tasks
    FOR VALUES IN ('completed', 'discarded', 'cancelled');

INSERT INTO docket_tasks SELECT * FROM docket_tasks_old;
DROP TABLE docket_tasks_old;
ALTER SEQUENCE docket_tasks_seq OWNED BY docket_tasks.id;

-- A primary key on id in each partition, none on the parent (it would have to be (id, state),
-- as a partitioned table's key must hold the partition column). Not only tidiness: the planner
-- takes an id as unique only from a one-column unique index; under (id, state) it estimated a
-- 1,000-id `id = ANY($1)` at 146,000 rows of a 500,000-row backlog and scanned the whole
-- partition for every claim (60 ms each; auto_explain, `docket bench --preload-finished`).
ALTER TABLE docket_tasks_live ADD CONSTRAINT docket_tasks_live_pkey PRIMARY KEY (id);
ALTER TABLE docket_tasks_done ADD CONSTRAINT docket_tasks_done_pkey PRIMARY KEY (id);
-- Across both: idempotency keys answer after the task finished; a user's task list.
CREATE INDEX docket_tasks_unique_any_idx ON docket_tasks (unique_key) WHERE unique_key IS NOT NULL;
CREATE INDEX docket_tasks_user_idx ON docket_tasks (user_id, id) WHERE user_id IS NOT NULL;

-- The hot partition: the same partial indexes as before (0001, 0003, 0014).
CREATE INDEX docket_tasks_claim_idx ON docket_tasks_live (queue, priority DESC, attempt, run_at, id)
    WHERE state = 'available';
CREATE INDEX docket_tasks_due_idx ON docket_tasks_live (run_at) WHERE state IN ('scheduled', 'retryable');
CREATE INDEX docket_tasks_lease_idx ON docket_tasks_live (lease_expires_at) WHERE state = 'running';
CREATE INDEX docket_tasks_running_key_idx ON docket_tasks_live (concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;
CREATE INDEX docket_tasks_expires_idx ON docket_tasks_live (expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
CREATE INDEX docket_tasks_key_waiting_idx ON docket_tasks_live (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
-- One unfinished task per unique_key: every row of the live partition is unfinished.
-- INSERT … ON CONFLICT DO NOTHING on docket_tasks checks it in the partition a row lands in.
CREATE UNIQUE INDEX docket_tasks_unique_idx ON docket_tasks_live (unique_key)
    WHERE unique_key IS NOT NULL;

-- The history partition: retention and the per-minute throughput read finish times.
CREATE INDEX docket_tasks_finished_idx ON docket_tasks_done (finished_at);

CREATE TRIGGER docket_tasks_wake_plain_insert AFTER INSERT ON docket_tasks
    FOR EACH STATEMENT EXECUTE FUNCTION docket_wake_plain_insert();
