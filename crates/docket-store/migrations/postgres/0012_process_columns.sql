-- The durable process a task belongs to, as columns: what its queue name ('process:<ns>') and
-- its payload's process_id said before. Tasks of no process keep NULLs.
ALTER TABLE docket_tasks ADD COLUMN namespace text, ADD COLUMN process_id text;
UPDATE docket_tasks SET namespace = substr(queue, 9), process_id = payload->>'process_id'
    WHERE queue LIKE 'process:%';
