-- name: publish
INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    VALUES (?, ?, ?, ?, ?, ?)

-- name: last_seq
SELECT CAST(COALESCE(max(seq), 0) AS SIGNED) AS n FROM docket_notifications

-- name: sink_ensure
INSERT INTO docket_sinks (name) VALUES (?1) ON DUPLICATE KEY UPDATE name = name

-- name: backlog
-- Undelivered notifications of a sink: how many (counted up to ?3) and the oldest one's time.
SELECT CAST(count(*) AS SIGNED) AS n, min(created_at) AS oldest FROM (SELECT created_at
    FROM docket_notifications WHERE namespace = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3) b

-- name: task_events_watch
-- Queues (?1, a JSON array of names) whose task events a sink publishes.
INSERT IGNORE INTO docket_task_event_queues (queue)
    SELECT q FROM JSON_TABLE(?1, '$[*]' COLUMNS (q VARCHAR(512) PATH '$')) t

-- name: task_events_arm_insert
-- Copies each insert into a watched queue (migration 0006; a refused insert fires nothing).
CREATE TRIGGER IF NOT EXISTS docket_task_events_ins AFTER INSERT ON docket_tasks FOR EACH ROW
    INSERT INTO docket_task_events (task_id, queue, kind, from_state, to_state, attempt,
        from_stage, stage, at)
    SELECT NEW.id, NEW.queue, NEW.kind, NULL, NEW.state, NEW.attempt, NULL, NEW.stage, UTC_TIMESTAMP(6)
    FROM DUAL WHERE EXISTS (SELECT 1 FROM docket_task_event_queues q WHERE q.queue = NEW.queue)

-- name: task_events_arm_update
-- Copies each change of state of a watched queue's task (finished tasks move to
-- docket_tasks_done by INSERT and DELETE there, which fire nothing here).
CREATE TRIGGER IF NOT EXISTS docket_task_events_upd AFTER UPDATE ON docket_tasks FOR EACH ROW
    INSERT INTO docket_task_events (task_id, queue, kind, from_state, to_state, attempt,
        from_stage, stage, at)
    SELECT NEW.id, NEW.queue, NEW.kind, OLD.state, NEW.state, NEW.attempt, OLD.stage,
        NEW.stage, UTC_TIMESTAMP(6)
    FROM DUAL WHERE NOT (OLD.state <=> NEW.state)
    AND EXISTS (SELECT 1 FROM docket_task_event_queues q WHERE q.queue = NEW.queue)

-- name: task_event_delete
-- The rows a sink published (?1, a JSON array of seqs), joined rather than `seq IN (SELECT …)`
-- (see tasks.delete): a backlog behind a broker outage is not scanned per delivered batch.
DELETE e FROM docket_task_events e
    JOIN JSON_TABLE(?1, '$[*]' COLUMNS (s BIGINT PATH '$')) t ON e.seq = t.s
