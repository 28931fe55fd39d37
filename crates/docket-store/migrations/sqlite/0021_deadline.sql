-- The attempt's deadline (µs), written by each claim from docket_core::lease::deadline_of
-- (attempted_at + timeout; NULL for a process step), so that the completion's guard compares
-- a stored value instead of computing the rule in SQL (issue 22).
ALTER TABLE docket_tasks ADD COLUMN deadline_at INTEGER;
UPDATE docket_tasks SET deadline_at = attempted_at + timeout_ms * 1000
    WHERE state = 'running' AND namespace IS NULL;
