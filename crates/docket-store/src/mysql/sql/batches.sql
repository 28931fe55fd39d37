-- Batches (issue 26; migration 0007). Settling (lock … settle) runs under the batch's
-- row lock, so of two nodes settling one batch the second finds it settled.

-- name: last_id
SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id

-- name: counts
-- The hot table and docket_tasks_done (0004): finished members may be in either.
SELECT state, CAST(sum(n) AS SIGNED) AS n FROM (
    SELECT state, count(*) AS n FROM docket_tasks WHERE batch_id = ?1 GROUP BY state
    UNION ALL SELECT state, count(*) AS n FROM docket_tasks_done WHERE batch_id = ?1 GROUP BY state
) c GROUP BY state

-- name: unfinished
-- Unfinished tasks never move to docket_tasks_done.
SELECT id FROM docket_tasks WHERE batch_id = ?1
    AND state IN ('scheduled', 'available', 'running', 'retryable') LIMIT 1

-- name: failed
SELECT id FROM (SELECT id FROM docket_tasks WHERE batch_id = ?1
    AND state IN ('discarded', 'cancelled')
    UNION ALL SELECT id FROM docket_tasks_done WHERE batch_id = ?1
    AND state IN ('discarded', 'cancelled')) f ORDER BY id LIMIT ?2

-- name: seal
UPDATE docket_batches SET sealed = TRUE WHERE id = ?1

-- name: unsettled
SELECT id FROM docket_batches WHERE settled_at IS NULL AND sealed AND id > ?1 ORDER BY id LIMIT ?2

-- Workflows (migration 0008): a workflow is a batch whose tasks have refs and dependencies. A
-- finished task may be in docket_tasks_done (0004): both are joined.

-- name: waiting
-- The tasks of batch ?1 waiting for their dependencies (scheduled at ?2, never due), one row
-- per dependency with its state (null: the dependency was pruned).
SELECT w.id, w.queue, d.ignore_failure, COALESCE(t.state, f.state) AS dep_state
    FROM docket_tasks w JOIN docket_task_deps d ON d.task_id = w.id
    LEFT JOIN docket_tasks t ON t.id = d.dep_id LEFT JOIN docket_tasks_done f ON f.id = d.dep_id
    WHERE w.batch_id = ?1 AND w.state = 'scheduled' AND w.run_at = ?2 ORDER BY w.id, d.dep_id

-- name: nodes
SELECT r.task_id AS id, COALESCE(t.kind, f.kind) AS kind, COALESCE(t.state, f.state) AS state,
    COALESCE(t.run_at, f.run_at) AS run_at, r.ref FROM docket_task_refs r
    LEFT JOIN docket_tasks t ON t.id = r.task_id LEFT JOIN docket_tasks_done f ON f.id = r.task_id
    WHERE r.batch_id = ?1 AND COALESCE(t.id, f.id) IS NOT NULL ORDER BY r.task_id

-- name: dep_results
-- The dependencies' results of each task in ?1 (a JSON array of ids: the workflow tasks of a
-- claim), by task, then dependency.
SELECT d.task_id, r.ref, COALESCE(t.result, f.result) AS result FROM docket_task_deps d
    JOIN docket_task_refs r ON r.task_id = d.dep_id
    LEFT JOIN docket_tasks t ON t.id = d.dep_id LEFT JOIN docket_tasks_done f ON f.id = d.dep_id
    WHERE d.task_id IN (SELECT j.id FROM JSON_TABLE(?1, '$[*]' COLUMNS (id BIGINT PATH '$')) j)
    ORDER BY d.task_id, d.dep_id

-- name: waiting_on
-- As waiting, for the waiting tasks that depend on one of the tasks in ?1 (a JSON array of
-- ids: tasks that just finished), whatever their batch.
SELECT w.id, w.queue, d.ignore_failure, COALESCE(t.state, f.state) AS dep_state FROM docket_tasks w
    JOIN docket_task_deps d ON d.task_id = w.id
    LEFT JOIN docket_tasks t ON t.id = d.dep_id LEFT JOIN docket_tasks_done f ON f.id = d.dep_id
    WHERE w.id IN (SELECT x.task_id FROM docket_task_deps x WHERE x.dep_id IN (SELECT j.id FROM JSON_TABLE(?1, '$[*]' COLUMNS (id BIGINT PATH '$')) j))
    AND w.state = 'scheduled' AND w.run_at = ?2 ORDER BY w.id, d.dep_id

-- name: refs
-- Every ref of a workflow (run-time additions check theirs against these under the lock).
SELECT ref FROM docket_task_refs WHERE batch_id = ?1

-- name: retry_queue
-- The queue of a failed task about to run again (MariaDB's UPDATE returns no rows).
SELECT queue FROM docket_tasks WHERE id = ?1 AND state IN ('discarded', 'cancelled')

-- name: retry_run
-- A workflow retry (docket_core::workflow::retry_plan): a failed task runs again now; one more
-- attempt allowed, as tasks.retry. MariaDB assigns left to right: state goes last.
UPDATE docket_tasks SET run_at = ?2, edited_at = ?2, finished_at = NULL, cancel_requested_at = NULL,
    max_attempts = GREATEST(max_attempts, attempt + 1), state = 'available'
    WHERE id = ?1 AND state IN ('discarded', 'cancelled')

-- name: retry_wait
-- A workflow retry: a failed task with dependencies waits for them again (never due).
UPDATE docket_tasks SET run_at = ?3, edited_at = ?2, finished_at = NULL, cancel_requested_at = NULL,
    max_attempts = GREATEST(max_attempts, attempt + 1), state = 'scheduled'
    WHERE id = ?1 AND state IN ('discarded', 'cancelled')
