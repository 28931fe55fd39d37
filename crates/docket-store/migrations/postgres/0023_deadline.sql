-- The attempt's deadline, written by each claim from docket_core::lease::deadline_of
-- (attempted_at + timeout; NULL for a process step, which has none), so that the completion's
-- guard compares a stored value instead of computing the rule in SQL (issue 22). Tasks
-- running when this migration runs get theirs here.
ALTER TABLE docket_tasks ADD COLUMN deadline_at timestamptz;
UPDATE docket_tasks SET deadline_at = attempted_at + timeout_ms * interval '1 millisecond'
    WHERE state = 'running' AND namespace IS NULL;
