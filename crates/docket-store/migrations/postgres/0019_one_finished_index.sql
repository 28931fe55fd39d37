-- One index on finish time, not two: every completion inserted an entry into both
-- docket_tasks_finished_idx (the pruner's) and docket_tasks_finished_at (the dashboard's
-- per-minute throughput). The throughput query filters finished states, so the pruner's
-- partial index serves it too; a completion now writes one index entry fewer.
DROP INDEX IF EXISTS docket_tasks_finished_at;
