-- When a task was last changed by hand or by its worker's progress (PATCH, retry, run now, a
-- heartbeat with progress), µs since the epoch. updated_at is the latest of this and its times.
ALTER TABLE docket_tasks ADD COLUMN edited_at INTEGER;
