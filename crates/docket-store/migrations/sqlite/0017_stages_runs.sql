-- Stages, the run log, the attempt's node, t_schedule_cfg settings (see the PostgreSQL
-- migration of the same number).
ALTER TABLE docket_tasks ADD COLUMN stage TEXT;
ALTER TABLE docket_tasks ADD COLUMN stages_done TEXT;
ALTER TABLE docket_tasks ADD COLUMN runs TEXT;
ALTER TABLE docket_tasks ADD COLUMN run_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE docket_tasks ADD COLUMN attempt_node TEXT;
ALTER TABLE docket_queues ADD COLUMN schedule_limit INTEGER CHECK (schedule_limit >= 1);
ALTER TABLE docket_queues ADD COLUMN schedule_interval_ms INTEGER CHECK (schedule_interval_ms > 0);
ALTER TABLE docket_queues ADD COLUMN created_at INTEGER;
UPDATE docket_queues SET created_at = updated_at;
