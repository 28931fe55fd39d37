-- The durable process a task belongs to (see the PostgreSQL migration of the same number).
ALTER TABLE docket_tasks ADD COLUMN namespace TEXT;
ALTER TABLE docket_tasks ADD COLUMN process_id TEXT;
UPDATE docket_tasks SET namespace = substr(queue, 9), process_id = json_extract(payload, '$.process_id')
    WHERE queue LIKE 'process:%';
