-- Batches (issue 26; migration 0025). Settling (lock … settle) runs under the batch's
-- row lock, so of two nodes settling one batch the second finds it settled.

-- name: last_id
SELECT lastval() AS id

-- name: list
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches
    WHERE ($1::bigint IS NULL OR id < $1) ORDER BY id DESC LIMIT $2

-- name: seal
UPDATE docket_batches SET sealed = true WHERE id = $1

-- name: unsettled
SELECT id FROM docket_batches WHERE settled_at IS NULL AND sealed AND id > $1 ORDER BY id LIMIT $2

-- Workflows (migration 0026): a workflow is a batch whose tasks have refs and dependencies.

-- name: release
-- Into the current ring slot, as promote does (migration 0021).
UPDATE docket_tasks SET state = 'available', run_at = $2,
    slot = COALESCE((SELECT current FROM docket_task_slots), 0)
    WHERE id = $1 AND state = 'scheduled' AND run_at = $3

-- name: dep_results
-- The dependencies' results of each task in $1 (a JSON array of ids: the workflow tasks of a
-- claim), by task, then dependency.
SELECT d.task_id, r.ref, t.result FROM docket_task_deps d JOIN docket_task_refs r ON r.task_id = d.dep_id
    JOIN docket_tasks t ON t.id = d.dep_id
    WHERE d.task_id IN (SELECT (jsonb_array_elements_text($1))::bigint) ORDER BY d.task_id, d.dep_id

-- name: waiting_on
-- As waiting, for the waiting tasks that depend on one of the tasks in $1 (a JSON array of
-- ids: tasks that just finished), whatever their batch.
SELECT w.id, w.queue, d.ignore_failure, t.state AS dep_state FROM docket_tasks w
    JOIN docket_task_deps d ON d.task_id = w.id LEFT JOIN docket_tasks t ON t.id = d.dep_id
    WHERE w.id IN (SELECT x.task_id FROM docket_task_deps x WHERE x.dep_id IN (SELECT (jsonb_array_elements_text($1))::bigint))
    AND w.state = 'scheduled' AND w.run_at = $2 ORDER BY w.id, d.dep_id

-- name: retry_run
-- A workflow retry (docket_core::workflow::retry_plan): a failed task runs again now, into the
-- current ring slot as release does; one more attempt allowed, as tasks.retry.
UPDATE docket_tasks SET state = 'available', run_at = $2, edited_at = $2, finished_at = NULL,
    cancel_requested_at = NULL, max_attempts = GREATEST(max_attempts, attempt + 1),
    slot = COALESCE((SELECT current FROM docket_task_slots), 0)
    WHERE id = $1 AND state IN ('discarded', 'cancelled')

-- name: retry_wait
-- A workflow retry: a failed task with dependencies waits for them again (run_at $3, never
-- due; slot 0 holds what is scheduled for later).
UPDATE docket_tasks SET state = 'scheduled', run_at = $3, edited_at = $2, finished_at = NULL,
    cancel_requested_at = NULL, max_attempts = GREATEST(max_attempts, attempt + 1), slot = 0
    WHERE id = $1 AND state IN ('discarded', 'cancelled')
