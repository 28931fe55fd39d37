-- Fair queues (issue 26 item 4): a task's partition (tenant), and a queue's fair-claim settings.
-- A fair claim ranks the queue's available tasks within their partition (row_number over
-- partition_key in claim order) and takes them round by round (docket_store::leases::fair_order);
-- the per-partition limit rides on concurrency_key (docket_core::task::NewTask::resolve).
ALTER TABLE docket_tasks ADD COLUMN partition_key text;
ALTER TABLE docket_queues ADD COLUMN fair boolean NOT NULL DEFAULT false,
    ADD COLUMN partition_weights jsonb, ADD COLUMN partition_limit integer;
