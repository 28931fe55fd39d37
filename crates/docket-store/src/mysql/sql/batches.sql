-- Batches (issue 26; migration 0007). Settling (lock … settle) runs under the batch's
-- row lock, so of two nodes settling one batch the second finds it settled.

-- name: create
INSERT INTO docket_batches (name, sealed, callbacks, created_at) VALUES (?1, ?2, ?3, ?4)

-- name: last_id
SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id

-- name: get
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches WHERE id = ?1

-- name: lock
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches
    WHERE id = ?1 FOR UPDATE

-- name: list
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches
    WHERE (?1 IS NULL OR id < ?1) ORDER BY id DESC LIMIT ?2

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

-- name: settle
UPDATE docket_batches SET settled_at = ?2, fired = ?3 WHERE id = ?1 AND settled_at IS NULL

-- name: unsettled
SELECT id FROM docket_batches WHERE settled_at IS NULL AND sealed AND id > ?1 ORDER BY id LIMIT ?2
