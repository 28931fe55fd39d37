-- name: publish
INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)

-- name: last_seq
SELECT COALESCE(max(seq), 0) AS n FROM docket_notifications

-- name: backlog
-- Undelivered notifications of a sink: how many (counted up to ?3) and the oldest one's time.
SELECT count(*) AS n, min(created_at) AS oldest FROM (SELECT created_at
    FROM docket_notifications WHERE namespace = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3) b

-- name: task_events_watch
-- Queues (?1, a JSON array of names) whose task events a sink publishes.
INSERT INTO docket_task_event_queues (queue) SELECT value FROM json_each(?1) WHERE true
    ON CONFLICT DO NOTHING

-- name: task_events_arm_insert
-- Copies each insert into a watched queue (migration 0022; only rows really inserted).
CREATE TRIGGER IF NOT EXISTS docket_task_events_ins AFTER INSERT ON docket_tasks
    WHEN EXISTS (SELECT 1 FROM docket_task_event_queues q WHERE q.queue = NEW.queue)
BEGIN
    INSERT INTO docket_task_events (task_id, queue, kind, from_state, to_state, attempt,
        from_stage, stage, at)
    VALUES (NEW.id, NEW.queue, NEW.kind, NULL, NEW.state, NEW.attempt, NULL, NEW.stage,
        CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
END

-- name: task_events_arm_update
-- Copies each change of state of a watched queue's task.
CREATE TRIGGER IF NOT EXISTS docket_task_events_upd AFTER UPDATE OF state ON docket_tasks
    WHEN OLD.state IS NOT NEW.state
    AND EXISTS (SELECT 1 FROM docket_task_event_queues q WHERE q.queue = NEW.queue)
BEGIN
    INSERT INTO docket_task_events (task_id, queue, kind, from_state, to_state, attempt,
        from_stage, stage, at)
    VALUES (NEW.id, NEW.queue, NEW.kind, OLD.state, NEW.state, NEW.attempt, OLD.stage,
        NEW.stage, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
END

-- name: task_event_delete
-- The rows a sink published (?1, a JSON array of seqs).
DELETE FROM docket_task_events WHERE seq IN (SELECT value FROM json_each(?1))
