-- batches: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/batches.sql replaces the one here on that backend.

-- name: create
INSERT INTO docket_batches (name, sealed, callbacks, created_at) VALUES (?1, ?2, ?3, ?4)

-- name: get
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches WHERE id = ?1

-- name: lock
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches
    WHERE id = ?1 FOR UPDATE

-- name: list
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches
    WHERE (?1 IS NULL OR id < ?1) ORDER BY id DESC LIMIT ?2

-- name: counts
SELECT state, count(*) AS n FROM docket_tasks WHERE batch_id = ?1 GROUP BY state

-- name: unfinished
SELECT id FROM docket_tasks WHERE batch_id = ?1
    AND state IN ('scheduled', 'available', 'running', 'retryable') LIMIT 1

-- name: failed
SELECT id FROM docket_tasks WHERE batch_id = ?1 AND state IN ('discarded', 'cancelled')
    ORDER BY id LIMIT ?2

-- name: settle
UPDATE docket_batches SET settled_at = ?2, fired = ?3 WHERE id = ?1 AND settled_at IS NULL

-- name: add_ref
INSERT INTO docket_task_refs (task_id, batch_id, ref) VALUES (?1, ?2, ?3)

-- name: add_dep
INSERT INTO docket_task_deps (task_id, dep_id, ignore_failure) VALUES (?1, ?2, ?3)

-- name: waiting
-- The tasks of batch ?1 waiting for their dependencies (scheduled at ?2, never due), one row
-- per dependency with its state (null: the dependency was pruned).
SELECT w.id, w.queue, d.ignore_failure, t.state AS dep_state FROM docket_tasks w
    JOIN docket_task_deps d ON d.task_id = w.id LEFT JOIN docket_tasks t ON t.id = d.dep_id
    WHERE w.batch_id = ?1 AND w.state = 'scheduled' AND w.run_at = ?2 ORDER BY w.id, d.dep_id

-- name: release
UPDATE docket_tasks SET state = 'available', run_at = ?2
    WHERE id = ?1 AND state = 'scheduled' AND run_at = ?3

-- name: cancel_waiting
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2
    WHERE id = ?1 AND state = 'scheduled' AND run_at = ?3

-- name: nodes
SELECT t.id, t.kind, t.state, t.run_at, r.ref FROM docket_task_refs r
    JOIN docket_tasks t ON t.id = r.task_id WHERE r.batch_id = ?1 ORDER BY r.task_id

-- name: edges
SELECT d.task_id, d.ignore_failure, r.ref FROM docket_task_refs w
    JOIN docket_task_deps d ON d.task_id = w.task_id JOIN docket_task_refs r ON r.task_id = d.dep_id
    WHERE w.batch_id = ?1 ORDER BY d.task_id, d.dep_id

-- name: refs
-- Every ref of workflow ?1 (run-time additions check theirs against these under the lock).
SELECT ref FROM docket_task_refs WHERE batch_id = ?1

-- name: retry_queue
-- The queue of a failed task about to run again.
SELECT queue FROM docket_tasks WHERE id = ?1 AND state IN ('discarded', 'cancelled')

-- name: unsettle
UPDATE docket_batches SET settled_at = NULL, fired = NULL WHERE id = ?1
