-- name: insert
WITH ins AS (
    INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, expires_at,
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter,
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, trace_id, created_at,
    namespace, process_id, backoff_kind, user_id, stage, progress, batch_id, rate_limit, partition_key, tags, affinity, slot)
    SELECT queue, kind, payload, priority, state, run_at, expires_at, max_attempts, bi, bc,
    bm, bj, timeout_ms, unique_key, concurrency_key, concurrency_limit, node, trace_id, $18,
    ns, pid, bk, uid, stg, prog, bat, rl, pk, tg, af,
    -- Migration 0021: the current ring slot for what can run now, slot 0 for the rest.
    CASE WHEN unique_key IS NULL AND state = 'available'
    THEN COALESCE((SELECT current FROM docket_task_slots), 0) ELSE 0 END
    FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::int[], $5::text[],
    $6::timestamptz[], $7::timestamptz[], $8::int[], $9::bigint[], $10::float8[],
    $11::bigint[], $12::float8[], $13::bigint[], $14::text[], $15::text[], $16::int[],
    $17::text[], $21::text[], $22::text[], $23::text[], $24::text[], $25::text[], $26::text[], $27::jsonb[], $28::bigint[], $29::text[], $30::text[], $31::jsonb[], $32::jsonb[]) WITH ORDINALITY AS x(queue, kind,
    payload, priority, state, run_at, expires_at, max_attempts, bi, bc, bm, bj, timeout_ms,
    unique_key, concurrency_key, concurrency_limit, node, trace_id, ns, pid, bk, uid, stg, prog, bat, rl, pk, tg, af, ord)
    ORDER BY ord
    ON CONFLICT DO NOTHING RETURNING id, unique_key, queue, state, kind, attempt, stage),
    -- Task events (migration 0024) of the rows really inserted, in watched queues.
    ev AS (INSERT INTO docket_task_events (task_id, queue, kind, to_state, attempt, stage)
    SELECT id, queue, kind, state, attempt, stage FROM ins
    WHERE queue IN (SELECT queue FROM docket_task_event_queues)),
    note AS (SELECT pg_notify($19, $20 || '|' || q) IS NULL
    FROM (SELECT DISTINCT queue AS q FROM ins WHERE state = 'available') s
    UNION ALL SELECT set_config('docket.woken', 'on', true) IS NULL)
    SELECT id, unique_key FROM ins WHERE (SELECT count(*) FROM note) >= 0

-- name: throughput
-- The kept minutes (docket_core::counts) and what finished after counted_to ($2, bound).
SELECT m, sum(completed)::bigint AS completed, sum(failed)::bigint AS failed FROM (
    SELECT minute AS m, completed, discarded AS failed FROM docket_queue_minutes
        WHERE minute >= date_trunc('minute', $1::timestamptz)
    UNION ALL
    SELECT date_trunc('minute', finished_at), count(*) FILTER (WHERE state = 'completed'),
        count(*) FILTER (WHERE state = 'discarded')
        FROM docket_tasks WHERE state IN ('completed', 'discarded')
        AND finished_at > $2 AND finished_at >= date_trunc('minute', $1::timestamptz)
        GROUP BY 1) c
    GROUP BY m ORDER BY m

-- name: lock
SELECT {COLS} FROM docket_tasks WHERE id = $1 FOR UPDATE

-- name: unfinished_by_unique_key
SELECT {COLS} FROM docket_tasks WHERE unique_key = $1 AND state IN
    ('scheduled','available','running','retryable')

-- name: get
SELECT {COLS} FROM docket_tasks WHERE id = $1

-- name: retry
UPDATE docket_tasks SET state = 'available', run_at = $2, edited_at = $2, finished_at = NULL,
    cancel_requested_at = NULL, max_attempts = GREATEST(max_attempts, attempt + 1)
    WHERE id = $1 AND state IN ('discarded','cancelled') RETURNING {COLS}

-- name: by_unique_key
SELECT {COLS} FROM docket_tasks WHERE unique_key = $1 ORDER BY id DESC LIMIT 1

-- name: list
-- Filters combine with AND; keyset paging by id, oldest ({cmp} >, {order} ASC) or newest first
-- ($14: any state; the arguments: portable/tasks.rs list_rows). {sort}: `id`, or `id + 0` for
-- a part of a tag's page the GIN index serves (portable/tasks.rs TagScan).
SELECT {COLS} FROM docket_tasks WHERE ($1::text IS NULL OR queue = $1)
    AND ($14::boolean OR state = ANY($2::text[])) AND ($3::text IS NULL OR kind = $3)
    AND ($4::bigint IS NULL OR id {cmp} $4) AND ($6::text IS NULL OR concurrency_key = $6)
    AND ($7::text IS NULL OR strpos(lower(payload::text || ' ' || COALESCE(errors::text, '')), lower($7)) > 0)
    AND ($8::text IS NULL OR user_id = $8) AND ($9::text IS NULL OR trace_id = $9)
    AND ($10::text IS NULL OR unique_key = $10) AND ($11::text IS NULL OR worker = $11)
    AND ($12::bigint IS NULL OR id >= $12) AND ($13::bigint IS NULL OR id <= $13)
    {tag}
    ORDER BY {sort} {order} LIMIT $5

-- name: tag_id_span
-- The ids a tag's page may hold (postgres/mod.rs tag_id_span): the least and greatest past the
-- cursor $1 ({cmp} as in list) inside the id window $2..=$3. Two ends of the primary key.
SELECT min(id) AS lo, max(id) AS hi FROM docket_tasks WHERE ($1::bigint IS NULL OR id {cmp} $1)
    AND ($2::bigint IS NULL OR id >= $2) AND ($3::bigint IS NULL OR id <= $3)


-- name: delete_lock
-- The finished tasks among $1 (a JSON array of ids) that no live process needs (the prune's
-- rule), locked, with what the kept counts need (docket_core::counts).
SELECT t.id, t.queue, t.state, t.finished_at FROM docket_tasks t
    WHERE t.id IN (SELECT (jsonb_array_elements_text($1))::bigint)
    AND t.state IN ('completed','discarded','cancelled')
    AND NOT (t.namespace IS NOT NULL AND EXISTS (SELECT 1 FROM docket_processes p
    WHERE p.namespace = t.namespace AND p.id = t.process_id))
    ORDER BY t.id FOR UPDATE OF t

-- name: delete
DELETE FROM docket_tasks WHERE id IN (SELECT (jsonb_array_elements_text($1))::bigint)

-- name: retry_lock
-- A task a retry may make unfinished, locked, with what the kept counts need.
SELECT queue, state, finished_at FROM docket_tasks WHERE id = $1
    AND state IN ('discarded','cancelled') FOR UPDATE

-- name: debounce_lock
-- The waiting task with debounce key $1 (docket_tasks_debounce_idx's condition), locked. A
-- claim that took it first leaves nothing (the row no longer matches once the lock is had).
-- Slot 0 holds every debounced task (migration 0033): the other leaves are not read.
SELECT {COLS}, debounce_until FROM docket_tasks WHERE debounce_key = $1 AND slot = 0
    AND state IN ('scheduled', 'available') AND attempted_at IS NULL FOR UPDATE
