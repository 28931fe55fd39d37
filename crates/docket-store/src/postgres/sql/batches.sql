-- Batches (issue 26; migration 0025). Settling (lock … settle) runs under the batch's
-- row lock, so of two nodes settling one batch the second finds it settled.

-- name: create
INSERT INTO docket_batches (name, sealed, callbacks, created_at) VALUES ($1, $2, $3, $4)

-- name: last_id
SELECT lastval() AS id

-- name: get
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches WHERE id = $1

-- name: lock
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches
    WHERE id = $1 FOR UPDATE

-- name: list
SELECT id, name, sealed, callbacks, created_at, settled_at, fired FROM docket_batches
    WHERE ($1::bigint IS NULL OR id < $1) ORDER BY id DESC LIMIT $2

-- name: counts
SELECT state, count(*) AS n FROM docket_tasks WHERE batch_id = $1 GROUP BY state

-- name: unfinished
SELECT id FROM docket_tasks WHERE batch_id = $1
    AND state IN ('scheduled', 'available', 'running', 'retryable') LIMIT 1

-- name: failed
SELECT id FROM docket_tasks WHERE batch_id = $1 AND state IN ('discarded', 'cancelled')
    ORDER BY id LIMIT $2

-- name: seal
UPDATE docket_batches SET sealed = true WHERE id = $1

-- name: settle
UPDATE docket_batches SET settled_at = $2, fired = $3 WHERE id = $1 AND settled_at IS NULL

-- name: unsettled
SELECT id FROM docket_batches WHERE settled_at IS NULL AND sealed AND id > $1 ORDER BY id LIMIT $2
