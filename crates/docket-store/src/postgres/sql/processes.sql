-- name: break_many
UPDATE docket_processes p SET
    previous_status = CASE WHEN p.status <> 'error' THEN p.status ELSE p.previous_status END,
    status_changed_at = CASE WHEN p.status <> 'error' THEN $3 ELSE p.status_changed_at END,
    status = 'error', detail = $4, corrupted_by = COALESCE(x.by, p.corrupted_by)
    FROM unnest($1::text[], $2::text[], $5::bigint[]) AS x(ns, id, by)
    WHERE p.namespace = x.ns AND p.id = x.id

-- name: cancel_waiting_many
UPDATE docket_tasks SET state = 'cancelled', finished_at = $2
    WHERE concurrency_key = ANY($1) AND state IN ('scheduled', 'available', 'retryable')

-- name: insert_events
-- Events of one process in one statement (task: the step's, NULL for an import).
INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload)
    SELECT $1, $2, e, k, t, m, p
    FROM unnest($3::bigint[], $4::bigint[], $5::timestamptz[], $6::jsonb[], $7::jsonb[])
    AS x(e, k, t, m, p)

-- name: cancel_timers
UPDATE docket_tasks SET state = 'cancelled', finished_at = $2 WHERE concurrency_key = $1
    AND kind IN (SELECT jsonb_array_elements_text($3)) AND state IN ('scheduled', 'available', 'retryable')

-- name: zombies
SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < $1
    AND namespace IS NOT NULL ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED

-- name: list
SELECT * FROM docket_processes WHERE namespace = $1 AND ($2::text IS NULL OR status = $2)
    AND ($3::text IS NULL OR id > $3) ORDER BY id LIMIT $4

-- name: events_after
SELECT * FROM docket_events WHERE namespace = $1 AND process_id = $2
    AND ($3::bigint IS NULL OR event_id > $3) ORDER BY event_id LIMIT $4

-- name: events_before
SELECT * FROM docket_events WHERE namespace = $1 AND process_id = $2
    AND ($3::bigint IS NULL OR event_id < $3) ORDER BY event_id DESC LIMIT $4

-- name: lock_status
-- FOR SHARE: a concurrent status change (which locks FOR UPDATE) waits for us, and then sees —
-- and cancels — the task we enqueue.
SELECT status FROM docket_processes WHERE namespace = $1 AND id = $2 FOR SHARE

-- name: lock_process
SELECT last_event_id, status FROM docket_processes WHERE namespace = $1 AND id = $2 FOR UPDATE

-- name: remove_unfinished
-- A removed process's unfinished tasks (timers, queued requests, the `remove` task itself) go.
DELETE FROM docket_tasks WHERE concurrency_key = $1
    AND state NOT IN ('completed', 'discarded', 'cancelled')

-- name: detach_finished
-- Its finished tasks stay, detached from the process (a caller on any node still reads its
-- answer; a new process of the same id starts with a clean trace and idempotency keys), as
-- plain finished tasks that the retention prune takes like any other.
UPDATE docket_tasks SET concurrency_key = NULL, unique_key = NULL, namespace = NULL,
    process_id = NULL WHERE concurrency_key = $1
