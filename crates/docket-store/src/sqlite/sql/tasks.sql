-- name: insert
INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, expires_at,
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter,
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, created_at, trace_id,
    namespace, process_id, backoff_kind, user_id, stage, progress, batch_id, rate_limit, partition_key,
    tags, affinity)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
    ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)
    ON CONFLICT DO NOTHING RETURNING id

-- name: throughput
-- The kept minutes (docket_core::counts) and what finished after the later of counted_to (?2)
-- and the first minute asked for: one lower bound, so the index range starts there (with both,
-- SQLite ranged over the index by `since`, an hour of finished tasks, 430 ms at 1M, and
-- filtered by counted_to).
SELECT m, sum(c) AS completed, sum(f) AS failed FROM (
    SELECT minute AS m, completed AS c, discarded AS f FROM docket_queue_minutes
        WHERE minute >= (?1 / 60000000) * 60000000
    UNION ALL
    -- All three finished states, as docket_tasks_finished_idx's condition says them: a subset
    -- is not seen to imply it, and the plan was a scan of every task (430 ms at 1M).
    SELECT (finished_at / 60000000) * 60000000, sum(state = 'completed'), sum(state = 'discarded')
        FROM docket_tasks WHERE state IN ('completed', 'discarded', 'cancelled')
        AND finished_at > max(?2, (?1 / 60000000) * 60000000 - 1) GROUP BY 1)
    GROUP BY m ORDER BY m

-- name: get
SELECT {COLS} FROM docket_tasks WHERE id = ?

-- name: unfinished_by_unique_key
SELECT {COLS} FROM docket_tasks WHERE unique_key = ? AND state IN
    ('scheduled','available','running','retryable')

-- name: retry
UPDATE docket_tasks SET state = 'available', run_at = ?2, edited_at = ?2, finished_at = NULL,
    cancel_requested_at = NULL, max_attempts = MAX(max_attempts, attempt + 1)
    WHERE id = ?1 AND state IN ('discarded','cancelled') RETURNING {COLS}

-- name: by_unique_key
SELECT {COLS} FROM docket_tasks WHERE unique_key = ? ORDER BY id DESC LIMIT 1

-- name: list
-- Filters combine with AND; keyset paging by id, oldest ({cmp} >, {order} ASC) or newest first
-- (?14: any state; the arguments: portable/tasks.rs list_rows).
SELECT {COLS} FROM docket_tasks WHERE (?1 IS NULL OR queue = ?1)
    AND (?14 OR state IN (SELECT value FROM json_each(?2))) AND (?3 IS NULL OR kind = ?3)
    AND (?4 IS NULL OR id {cmp} ?4) AND (?6 IS NULL OR concurrency_key = ?6)
    AND (?7 IS NULL OR instr(lower(payload || ' ' || COALESCE(errors, '')), lower(?7)) > 0)
    AND (?8 IS NULL OR user_id = ?8) AND (?9 IS NULL OR trace_id = ?9)
    AND (?10 IS NULL OR unique_key = ?10) AND (?11 IS NULL OR worker = ?11)
    AND (?12 IS NULL OR id >= ?12) AND (?13 IS NULL OR id <= ?13)
    {tag}
    ORDER BY id {order} LIMIT ?5

-- name: delete_lock
-- The finished tasks among ?1 (a JSON array of ids) that no live process needs (the prune's
-- rule), with what the kept counts need (docket_core::counts). The write transaction locks.
SELECT t.id, t.queue, t.state, t.finished_at FROM docket_tasks t
    WHERE t.id IN (SELECT value FROM json_each(?1))
    AND t.state IN ('completed','discarded','cancelled')
    AND NOT (t.namespace IS NOT NULL AND EXISTS (SELECT 1 FROM docket_processes p
    WHERE p.namespace = t.namespace AND p.id = t.process_id))
    ORDER BY t.id

-- name: delete
DELETE FROM docket_tasks WHERE id IN (SELECT value FROM json_each(?1))

-- name: retry_lock
-- A task a retry may make unfinished, with what the kept counts need.
SELECT queue, state, finished_at FROM docket_tasks WHERE id = ?1
    AND state IN ('discarded','cancelled')

-- name: lock
-- The writer lock (BEGIN IMMEDIATE) holds the row.
SELECT {COLS} FROM docket_tasks WHERE id = ?1

-- name: debounce_lock
-- The waiting task with debounce key ?1 (docket_tasks_debounce_idx's condition); the writer
-- lock (BEGIN IMMEDIATE) holds it.
SELECT {COLS}, debounce_until FROM docket_tasks WHERE debounce_key = ?1
    AND state IN ('scheduled', 'available') AND attempted_at IS NULL
