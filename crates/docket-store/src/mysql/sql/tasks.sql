-- name: id_settings
SELECT CAST(@@innodb_autoinc_lock_mode AS SIGNED) AS m,
    CAST(@@auto_increment_increment AS SIGNED) AS i

-- name: insert
INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, expires_at,
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter,
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, created_at, trace_id,
    namespace, process_id, backoff_kind, user_id, stage, progress, batch_id, rate_limit, partition_key, tags, affinity, errors)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]')

-- name: cancel
-- A running task keeps running, asked to stop; the others are cancelled. MySQL assigns left to
-- right: `state` last, so the tests before it read the old state.
UPDATE docket_tasks SET
    finished_at = CASE WHEN state = 'running' THEN finished_at ELSE ?2 END,
    cancel_requested_at = CASE WHEN state = 'running' THEN COALESCE(cancel_requested_at, ?2)
    ELSE cancel_requested_at END,
    state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END
    WHERE id = ?1 AND state IN ('scheduled','available','running','retryable')

-- name: retry
UPDATE docket_tasks SET run_at = ?2, edited_at = ?2, finished_at = NULL, cancel_requested_at = NULL,
    max_attempts = GREATEST(max_attempts, attempt + 1), state = 'available'
    WHERE id = ?1 AND state IN ('discarded','cancelled')

-- name: run_now
UPDATE docket_tasks SET state = 'available', run_at = ?2, edited_at = ?2
    WHERE id = ?1 AND state IN ('scheduled', 'retryable')

-- name: throughput
-- The kept minutes (docket_core::counts) and what finished after counted_to, in either table.
SELECT m, CAST(SUM(c) AS SIGNED) AS completed, CAST(SUM(f) AS SIGNED) AS failed FROM (
    SELECT minute AS m, completed AS c, discarded AS f FROM docket_queue_minutes
        WHERE minute >= CAST(DATE_FORMAT(?1, '%Y-%m-%d %H:%i:00') AS DATETIME(6))
    UNION ALL
    SELECT CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)),
        state = 'completed', state = 'discarded' FROM docket_tasks
        WHERE state IN ('completed', 'discarded')
        AND finished_at > ?2
        AND finished_at >= CAST(DATE_FORMAT(?1, '%Y-%m-%d %H:%i:00') AS DATETIME(6))
    UNION ALL
    SELECT CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)),
        state = 'completed', state = 'discarded' FROM docket_tasks_done
        WHERE state IN ('completed', 'discarded')
        AND finished_at > ?2
        AND finished_at >= CAST(DATE_FORMAT(?1, '%Y-%m-%d %H:%i:00') AS DATETIME(6))) t
    GROUP BY m ORDER BY m

-- name: update
-- A task's changeable columns as the engine's patch rule left them (?1 the id).
UPDATE docket_tasks SET queue = ?2, priority = ?3, run_at = ?4, state = ?5,
    payload = ?6, node = ?7, max_attempts = ?8, stage = ?9, progress = ?10,
    attempt = ?11, backoff_kind = ?12, backoff_initial_ms = ?13, backoff_coefficient = ?14,
    backoff_max_ms = ?15, backoff_jitter = ?16, edited_at = ?17
WHERE id = ?1

-- name: get_done
SELECT {COLS} FROM docket_tasks_done WHERE id = ?

-- name: unfinished_by_unique_key
SELECT {COLS} FROM docket_tasks WHERE unique_active = ?

-- name: get
SELECT {COLS} FROM docket_tasks WHERE id = ?1
    UNION ALL SELECT {COLS} FROM docket_tasks_done WHERE id = ?1 LIMIT 1

-- name: by_unique_key
(SELECT {COLS} FROM docket_tasks WHERE unique_key = ?1 ORDER BY id DESC LIMIT 1)
    UNION ALL (SELECT {COLS} FROM docket_tasks_done WHERE unique_key = ?1
    ORDER BY id DESC LIMIT 1) ORDER BY id DESC LIMIT 1

-- name: list
-- Filters combine with AND; keyset paging by id, oldest ({cmp} >, {order} ASC) or newest
-- first (?14: any state; ?2 becomes one `?` per state; the arguments: portable/tasks.rs
-- list_rows). The hot table and docket_tasks_done (0004), each cut to the page before the
-- union.
(SELECT {COLS} FROM docket_tasks WHERE (?1 IS NULL OR queue = ?1) AND (?14 OR state IN (?2))
    AND (?3 IS NULL OR kind = ?3) AND (?4 IS NULL OR id {cmp} ?4)
    AND (?6 IS NULL OR concurrency_key = ?6)
    AND (?7 IS NULL OR LOCATE(LOWER(?7), LOWER(CONCAT(payload, ' ', errors))) > 0)
    AND (?8 IS NULL OR user_id = ?8) AND (?9 IS NULL OR trace_id = ?9)
    AND (?10 IS NULL OR unique_key = ?10) AND (?11 IS NULL OR worker = ?11)
    AND (?12 IS NULL OR id >= ?12) AND (?13 IS NULL OR id <= ?13)
    {tag}
    ORDER BY id {order} LIMIT ?5)
UNION ALL
(SELECT {COLS} FROM docket_tasks_done WHERE (?1 IS NULL OR queue = ?1) AND (?14 OR state IN (?2))
    AND (?3 IS NULL OR kind = ?3) AND (?4 IS NULL OR id {cmp} ?4)
    AND (?6 IS NULL OR concurrency_key = ?6)
    AND (?7 IS NULL OR LOCATE(LOWER(?7), LOWER(CONCAT(payload, ' ', errors))) > 0)
    AND (?8 IS NULL OR user_id = ?8) AND (?9 IS NULL OR trace_id = ?9)
    AND (?10 IS NULL OR unique_key = ?10) AND (?11 IS NULL OR worker = ?11)
    AND (?12 IS NULL OR id >= ?12) AND (?13 IS NULL OR id <= ?13)
    {tag}
    ORDER BY id {order} LIMIT ?5)
ORDER BY id {order} LIMIT ?5

-- name: insert_many
-- Tasks without a unique key in one statement; {rows}: insert_values once per task.
INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, expires_at,
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter,
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, created_at, trace_id,
    namespace, process_id, backoff_kind, user_id, stage, progress, batch_id, rate_limit, partition_key, tags, affinity, errors) VALUES {rows}

-- name: insert_values
(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]')

-- name: lock
SELECT {COLS} FROM docket_tasks WHERE id = ? FOR UPDATE

-- name: get_live
SELECT {COLS} FROM docket_tasks WHERE id = ?

-- name: lock_live
-- Waits for a rotation moving any of them (unarchive).
SELECT id FROM docket_tasks WHERE id IN ({ids}) FOR UPDATE

-- name: lock_done
SELECT id FROM docket_tasks_done WHERE id IN ({ids}) FOR UPDATE

-- name: unarchive
-- Finished tasks back to the hot table for a change (retry, cancel, update); delete_done follows.
INSERT INTO docket_tasks ({COLS}) SELECT {COLS} FROM docket_tasks_done
    WHERE id IN ({ids})

-- name: delete_done
DELETE FROM docket_tasks_done WHERE id IN ({ids})

-- name: delete_lock
-- The finished tasks among ?1 (a JSON array of ids, brought back from docket_tasks_done
-- first) that no live process needs (the prune's rule), locked, with what the kept counts
-- need (docket_core::counts).
SELECT t.id, t.queue, t.state, t.finished_at FROM docket_tasks t
    WHERE t.id IN (SELECT j.id FROM JSON_TABLE(?1, '$[*]' COLUMNS (id BIGINT PATH '$')) j)
    AND t.state IN ('completed','discarded','cancelled')
    AND NOT (t.namespace IS NOT NULL AND EXISTS (SELECT 1 FROM docket_processes p
    WHERE p.namespace = t.namespace AND p.id = t.process_id))
    ORDER BY t.id FOR UPDATE

-- name: delete
-- Tasks ?1 (a JSON array of ids). A join, not `id IN (SELECT … JSON_TABLE)`: MariaDB 10.11
-- runs a single-table DELETE's IN-subquery per row of a full scan (EXPLAIN: type ALL); the
-- join reads the ids and finds each by primary key (mysql::tests::id_lists_use_the_key).
DELETE t FROM docket_tasks t
    JOIN JSON_TABLE(?1, '$[*]' COLUMNS (id BIGINT PATH '$')) j ON t.id = j.id

-- name: retry_lock
-- A task a retry may make unfinished (brought back from docket_tasks_done first), locked, with
-- what the kept counts need.
SELECT queue, state, finished_at FROM docket_tasks WHERE id = ?1
    AND state IN ('discarded','cancelled') FOR UPDATE

-- name: debounce_replace
-- As the shared statement, without RETURNING (change_task reads the row back).
UPDATE docket_tasks SET queue = ?2, kind = ?3, payload = ?4, priority = ?5, run_at = ?6,
    state = ?7, expires_at = ?8, max_attempts = ?9, backoff_kind = ?10,
    backoff_initial_ms = ?11, backoff_coefficient = ?12, backoff_max_ms = ?13,
    backoff_jitter = ?14, timeout_ms = ?15, concurrency_key = ?16, concurrency_limit = ?17,
    rate_limit = ?18, partition_key = ?19, node = ?20, user_id = ?21, stage = ?22,
    progress = ?23, edited_at = ?24, tags = ?25, affinity = ?26
    WHERE id = ?1

-- name: debounce_lock
-- The waiting task with debounce key ?1 (docket_debounce_waiting, migration 0018) and its
-- row there, locked: a rival enqueuer with the key waits here until this one commits. A row
-- whose task no longer waits gives nothing (debounce_own then takes it over).
SELECT {COLS}, debounce_until FROM docket_debounce_waiting
    JOIN docket_tasks ON docket_tasks.id = docket_debounce_waiting.task_id
    WHERE waiting_key = ?1 AND state IN ('scheduled', 'available') AND attempted_at IS NULL
    FOR UPDATE

-- name: debounce_own_lock
-- Debounce key ?1's row, locked, with whether its task still waits (a locking read sees the
-- newest committed task, so a rival's task that committed while this waited counts).
SELECT docket_debounce_waiting.task_id, docket_tasks.id IS NOT NULL AS waiting
    FROM docket_debounce_waiting LEFT JOIN docket_tasks
        ON docket_tasks.id = docket_debounce_waiting.task_id
        AND docket_tasks.state IN ('scheduled', 'available')
        AND docket_tasks.attempted_at IS NULL
    WHERE waiting_key = ?1 FOR UPDATE

-- name: debounce_own_add
-- Debounce key ?1 waits with task ?2; a rival that added the key first makes this a unique
-- violation once it commits (a conflict: the flow goes again).
INSERT INTO docket_debounce_waiting (waiting_key, task_id) VALUES (?1, ?2)

-- name: debounce_own_move
-- Debounce key ?1, whose task no longer waits (debounce_own_lock), waits with task ?2.
UPDATE docket_debounce_waiting SET task_id = ?2 WHERE waiting_key = ?1

-- name: tags_clear
-- Task ?1's side-table tags, before they are written again (retag).
DELETE FROM docket_task_tags WHERE task_id = ?1

-- name: tags_add_many
-- Inserted tasks' tags into the side table (migration 0018): ?1 a JSON array of
-- {"id": task id, "tags": [tag, ...]}, only the tagged tasks.
INSERT IGNORE INTO docket_task_tags (tag, task_id)
    SELECT j.tag, j.id FROM JSON_TABLE(?1, '$[*]' COLUMNS (id BIGINT PATH '$.id',
        NESTED PATH '$.tags[*]' COLUMNS (tag VARCHAR(512) PATH '$'))) j

-- name: forget_tags
-- The side-table rows of tasks {ids}, deleted from both task tables (migration 0018).
DELETE FROM docket_task_tags WHERE task_id IN ({ids})

-- name: forget_debounce
DELETE FROM docket_debounce_waiting WHERE task_id IN ({ids})

-- name: tags_add
-- Task ?1's tags ?2 (a JSON array) into the side table.
INSERT IGNORE INTO docket_task_tags (tag, task_id)
    SELECT j.tag, ?1 FROM JSON_TABLE(?2, '$[*]' COLUMNS (tag VARCHAR(512) PATH '$')) j
