-- runs: durable functions' runs, journals and mailboxes (docket_store::portable::runs; migration
-- postgres 0032). Numbered placeholders `?N` (PostgreSQL's `$N` made by the loader); a statement
-- of the same name in a backend's own sql/runs.sql replaces the one here on that backend.

-- name: get
SELECT {RUN_COLS} FROM docket_workflow_runs WHERE id = ?1

-- name: lock
-- The run's row, locked for the rest of the transaction (every flow of a run takes it first).
SELECT {RUN_COLS} FROM docket_workflow_runs WHERE id = ?1 FOR UPDATE

-- name: get_many
-- Runs ?1 (ids), not locked; a start batch's.
SELECT {RUN_COLS} FROM docket_workflow_runs WHERE id IN (?1)

-- name: lock_many
-- Runs ?1 (ids, in id order: one lock order for every caller) locked; a report batch's.
SELECT {RUN_COLS} FROM docket_workflow_runs WHERE id IN (?1) ORDER BY id FOR UPDATE

-- name: insert
-- A run (DriverTx::update_each: a statement per row).
INSERT INTO docket_workflow_runs (id, workflow, queue, state, input, parent_id, task_id, steps,
    created_at, updated_at) VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, 0, ?7, ?7)

-- name: list
SELECT {RUN_COLS} FROM docket_workflow_runs
    WHERE (?1 IS NULL OR workflow = ?1) AND (?2 IS NULL OR state = ?2)
    AND (?3 IS NULL OR parent_id = ?3) AND (?4 IS NULL OR created_at >= ?4)
    AND (?5 IS NULL OR created_at < ?5)
    ORDER BY created_at DESC, id DESC LIMIT ?6

-- name: entries
SELECT {ENTRY_COLS} FROM docket_workflow_steps WHERE run_id = ?1 ORDER BY seq

-- name: entries_from
-- The entries at seq ?2 and after (what a record compares its entries with).
SELECT {ENTRY_COLS} FROM docket_workflow_steps WHERE run_id = ?1 AND seq >= ?2 ORDER BY seq

-- name: entry_insert
-- DriverTx::update_each: a statement per entry.
INSERT INTO docket_workflow_steps (run_id, seq, kind, name, state, output, error, attempts,
    child_id, started_at, finished_at, wake_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)

-- name: entry_end
UPDATE docket_workflow_steps SET state = ?3, output = ?4, finished_at = ?5
    WHERE run_id = ?1 AND seq = ?2

-- name: sleeps_over
-- A resume: the run's sleeps whose end has come are over.
UPDATE docket_workflow_steps SET state = 'completed', finished_at = ?2
    WHERE run_id = ?1 AND kind = 'sleep' AND state = 'waiting' AND wake_at <= ?2

-- name: set_steps
-- DriverTx::update_each: a statement per run.
UPDATE docket_workflow_runs SET steps = CASE WHEN steps < ?2 THEN ?2 ELSE steps END,
    updated_at = ?3 WHERE id = ?1

-- name: set_state
UPDATE docket_workflow_runs SET state = ?2, waiting_for = ?3, wake_at = ?4, updated_at = ?5
    WHERE id = ?1

-- name: finish
-- The run ?2 ends at ?1; its journal's length is raised to ?6 (the entries its finish
-- recorded). DriverTx::update_each: ?1 shared, a statement per run.
UPDATE docket_workflow_runs SET state = ?3, result = ?4, error = ?5, finished_at = ?1,
    updated_at = ?1, waiting_for = NULL, wake_at = NULL,
    steps = CASE WHEN steps < ?6 THEN ?6 ELSE steps END WHERE id = ?2

-- name: reopen
UPDATE docket_workflow_runs SET state = 'running', result = NULL, error = NULL,
    finished_at = NULL, waiting_for = NULL, wake_at = NULL, updated_at = ?2 WHERE id = ?1

-- name: open_children
SELECT id FROM docket_workflow_runs WHERE parent_id = ?1
    AND state NOT IN ('completed', 'failed', 'cancelled') ORDER BY id

-- name: event_insert
INSERT INTO docket_workflow_events (run_id, name, payload, sent_at) VALUES (?1, ?2, ?3, ?4)

-- name: event_next
-- The oldest event of name ?2 no wait has taken yet.
SELECT id, payload FROM docket_workflow_events WHERE run_id = ?1 AND name = ?2
    AND taken_seq IS NULL ORDER BY id LIMIT 1

-- name: event_take
UPDATE docket_workflow_events SET taken_seq = ?2 WHERE id = ?1

-- name: suspend_task
-- The run's task handed back until ?2 (its lease checked first): the attempt is logged (the run
-- log fragment first: MySQL assigns left to right), the next one is a replay (stage resume).
UPDATE docket_tasks SET {runs:completed:?3}, state = 'scheduled', run_at = ?2, stage = 'resume',
    attempt = 0, lease_expires_at = NULL WHERE id = ?1 AND state = 'running'

-- name: wake_task
-- A sent event the run waits for: its handed-back task can run now.
UPDATE docket_tasks SET state = 'available', run_at = ?2 WHERE id = ?1 AND state = 'scheduled'

-- name: prune_ids
SELECT id FROM docket_workflow_runs WHERE finished_at < ?1 ORDER BY finished_at LIMIT ?2

-- name: prune_entries
DELETE FROM docket_workflow_steps WHERE run_id = ?1

-- name: prune_events
DELETE FROM docket_workflow_events WHERE run_id = ?1

-- name: prune_run
DELETE FROM docket_workflow_runs WHERE id = ?1
