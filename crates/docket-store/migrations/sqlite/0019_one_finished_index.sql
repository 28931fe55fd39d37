-- One index on finish time, not two (see the PostgreSQL migration of the same number).
DROP INDEX IF EXISTS docket_tasks_finished_at;
