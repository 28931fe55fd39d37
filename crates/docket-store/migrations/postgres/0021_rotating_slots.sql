-- Bounded bloat while a snapshot is held open (issue 13, PgQ's table rotation). Every task
-- leaves two dead tuples where it lived (the claim's update, the completion's move to
-- docket_tasks_done), and while any transaction holds an old snapshot VACUUM can reclaim none of
-- them: 30 minutes at 800 tasks/s grew the live partition to 2.16M dead tuples and 800 MB.
-- TRUNCATE frees a table whatever snapshots are open. So the live partition is split by `slot`:
--   docket_tasks_live_0     the fixed slot: tasks with a unique_key (its unique index needs one
--                           table), tasks scheduled for later, plain-SQL inserts (slot defaults
--                           to 0), and the stragglers of the ring. VACUUM keeps it, as before.
--   docket_tasks_live_1..4  the ring: a task available when inserted (docket's own insert) or
--                           when promoted goes into the current ring slot. The rotation
--                           (maintenance, every second by default) moves what is left in the
--                           next slot (tasks older than three rotations) into slot 0, truncates
--                           it, and makes it current: its dead tuples go with it.
-- docket_task_slots holds the current ring slot and when it last turned.
ALTER TABLE docket_tasks ADD COLUMN slot smallint NOT NULL DEFAULT 0;

ALTER TABLE docket_tasks DETACH PARTITION docket_tasks_live;
ALTER TABLE docket_tasks_live RENAME TO docket_tasks_live_old;
-- The old partition's indexes keep their names until it is dropped; the new ones need them.
DROP INDEX docket_tasks_claim_idx, docket_tasks_due_idx, docket_tasks_lease_idx,
    docket_tasks_running_key_idx, docket_tasks_expires_idx, docket_tasks_key_waiting_idx,
    docket_tasks_unique_idx;

CREATE TABLE docket_tasks_live PARTITION OF docket_tasks
    FOR VALUES IN ('scheduled', 'available', 'running', 'retryable') PARTITION BY LIST (slot);
CREATE TABLE docket_tasks_live_0 PARTITION OF docket_tasks_live FOR VALUES IN (0);
CREATE TABLE docket_tasks_live_1 PARTITION OF docket_tasks_live FOR VALUES IN (1);
CREATE TABLE docket_tasks_live_2 PARTITION OF docket_tasks_live FOR VALUES IN (2);
CREATE TABLE docket_tasks_live_3 PARTITION OF docket_tasks_live FOR VALUES IN (3);
CREATE TABLE docket_tasks_live_4 PARTITION OF docket_tasks_live FOR VALUES IN (4);
-- No autovacuum in the ring: a slot is truncated four turns after it was filled, and a VACUUM
-- running on it holds a lock the truncate must wait for (claims queue behind that wait). Right
-- after a burst of 1M tasks (docket bench --preload-finished 1000000, 8 runs / 4 runs): with
-- autovacuum on the slots 20,036-52,330 tasks/s (two runs collapsed to ~20k), without it
-- 43,128-59,428; with the ring not turning at all 53,970-61,897.
ALTER TABLE docket_tasks_live_1 SET (autovacuum_enabled = false);
ALTER TABLE docket_tasks_live_2 SET (autovacuum_enabled = false);
ALTER TABLE docket_tasks_live_3 SET (autovacuum_enabled = false);
ALTER TABLE docket_tasks_live_4 SET (autovacuum_enabled = false);
-- A ring slot never holds a task with a unique_key: its uniqueness is checked by slot 0's index.
ALTER TABLE docket_tasks_live_1 ADD CONSTRAINT docket_tasks_live_1_no_unique CHECK (unique_key IS NULL);
ALTER TABLE docket_tasks_live_2 ADD CONSTRAINT docket_tasks_live_2_no_unique CHECK (unique_key IS NULL);
ALTER TABLE docket_tasks_live_3 ADD CONSTRAINT docket_tasks_live_3_no_unique CHECK (unique_key IS NULL);
ALTER TABLE docket_tasks_live_4 ADD CONSTRAINT docket_tasks_live_4_no_unique CHECK (unique_key IS NULL);

INSERT INTO docket_tasks SELECT * FROM docket_tasks_live_old;
DROP TABLE docket_tasks_live_old;

-- As in 0020: a one-column primary key per leaf, so the planner knows an id is unique.
ALTER TABLE docket_tasks_live_0 ADD CONSTRAINT docket_tasks_live_0_pkey PRIMARY KEY (id);
ALTER TABLE docket_tasks_live_1 ADD CONSTRAINT docket_tasks_live_1_pkey PRIMARY KEY (id);
ALTER TABLE docket_tasks_live_2 ADD CONSTRAINT docket_tasks_live_2_pkey PRIMARY KEY (id);
ALTER TABLE docket_tasks_live_3 ADD CONSTRAINT docket_tasks_live_3_pkey PRIMARY KEY (id);
ALTER TABLE docket_tasks_live_4 ADD CONSTRAINT docket_tasks_live_4_pkey PRIMARY KEY (id);

-- The hot indexes of 0020, on every slot.
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
CREATE UNIQUE INDEX docket_tasks_unique_idx ON docket_tasks_live_0 (unique_key)
    WHERE unique_key IS NOT NULL;

CREATE TABLE docket_task_slots (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    current smallint NOT NULL CHECK (current BETWEEN 1 AND 4),
    rotated_at timestamptz
);
INSERT INTO docket_task_slots (current) VALUES (1);
