-- Fair queues (issue 26 item 4): a task's partition (tenant), and a queue's fair-claim settings.
-- A fair claim ranks each partition's first available tasks (row_number in claim order) and
-- takes them round by round (docket_store::leases::Fairness);
-- the per-partition limit rides on concurrency_key (docket_core::task::NewTask::resolve).
ALTER TABLE docket_tasks ADD COLUMN partition_key text;
-- Partitioned available tasks in claim order per partition: a fair claim skip-scans it for the
-- partitions with work and reads each one's first tasks. Tasks without a partition are not in
-- it, so plain queues pay nothing for it.
CREATE INDEX docket_tasks_fair_idx ON docket_tasks_live
    (queue, partition_key, priority DESC, attempt, run_at, id)
    WHERE state = 'available' AND partition_key IS NOT NULL;
ALTER TABLE docket_queues ADD COLUMN fair boolean NOT NULL DEFAULT false,
    ADD COLUMN partition_weights jsonb, ADD COLUMN partition_limit integer;
