-- Stages, the run log, the attempt's node, t_schedule_cfg settings (see PostgreSQL's 0017).
ALTER TABLE docket_tasks
    ADD COLUMN stage VARCHAR(512) NULL,
    ADD COLUMN stages_done JSON NULL,
    ADD COLUMN runs JSON NULL,
    ADD COLUMN run_count INT NOT NULL DEFAULT 0,
    ADD COLUMN attempt_node VARCHAR(512) NULL;
ALTER TABLE docket_queues
    ADD COLUMN schedule_limit INT NULL CHECK (schedule_limit >= 1),
    ADD COLUMN schedule_interval_ms BIGINT NULL CHECK (schedule_interval_ms > 0),
    ADD COLUMN created_at DATETIME(6) NULL;
UPDATE docket_queues SET created_at = updated_at;
