-- asyncflow's multi-stage tasks (task_stage), the run log of every attempt (schedule_log), the
-- node an attempt runs on, and asyncflow's per-queue t_schedule_cfg settings.
ALTER TABLE docket_tasks ADD COLUMN stage text;
ALTER TABLE docket_tasks ADD COLUMN stages_done jsonb;
ALTER TABLE docket_tasks ADD COLUMN runs jsonb;
ALTER TABLE docket_tasks ADD COLUMN run_count integer NOT NULL DEFAULT 0;
ALTER TABLE docket_tasks ADD COLUMN attempt_node text;
ALTER TABLE docket_queues ADD COLUMN schedule_limit integer CHECK (schedule_limit >= 1);
ALTER TABLE docket_queues ADD COLUMN schedule_interval_ms bigint CHECK (schedule_interval_ms > 0);
ALTER TABLE docket_queues ADD COLUMN created_at timestamptz;
UPDATE docket_queues SET created_at = updated_at;
ALTER TABLE docket_queues ALTER COLUMN created_at SET DEFAULT now();
