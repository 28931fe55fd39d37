-- name: publish_failed_many
INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    SELECT ns, id, 'failed', NULL, d, $4 FROM unnest($1::text[], $2::text[], $3::jsonb[])
    WITH ORDINALITY AS x(ns, id, d, o) ORDER BY o

-- name: publish
INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    SELECT $1, $2, k, e, d, $3 FROM unnest($4::text[], $5::bigint[], $6::jsonb[])
    WITH ORDINALITY AS x(k, e, d, o) ORDER BY o

-- name: list
SELECT * FROM docket_notifications WHERE seq > $1 AND ($2::text IS NULL OR namespace = $2)
    ORDER BY seq LIMIT $3

-- name: last_seq
SELECT COALESCE(max(seq), 0)::int8 AS n FROM docket_notifications

-- name: backlog
-- Undelivered notifications of a sink: how many (counted up to $3) and the oldest one's time.
SELECT count(*)::int8 AS n, min(created_at) AS oldest FROM (SELECT created_at
    FROM docket_notifications WHERE namespace = $1 AND seq > $2 ORDER BY seq LIMIT $3) b

-- name: task_events_watch
-- Queues ($1, a JSON array of names) whose task events a sink publishes.
INSERT INTO docket_task_event_queues (queue) SELECT jsonb_array_elements_text($1::jsonb)
    ON CONFLICT DO NOTHING

-- name: task_events_arm_insert
-- Nothing to arm: `insert` (tasks.sql) copies inserts into watched queues itself.
SELECT 1

-- name: task_events_arm_update
-- Copies each change of state of a watched queue's task (migration 0024). BEFORE: it fires
-- on the partition a row leaves, also when the change moves it (to docket_tasks_done); the
-- ring's moves change `slot`, not `state`, and are not seen. Inserts are copied by `insert`
-- (tasks.sql), which sees only the rows a unique key did not turn away. The watched queues
-- are written into the WHEN clause, so other queues' rows never call the function: the
-- trigger is made again when the list changed (its comment holds the list it was made
-- with), under a lock, so nodes watching at once each see the others' queues.
DO $$
DECLARE
    qs text;
    made text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || ':docket_task_events_arm', 0));
    SELECT string_agg(quote_literal(queue), ', ' ORDER BY queue) INTO qs
        FROM docket_task_event_queues;
    IF qs IS NULL THEN
        RETURN;
    END IF;
    SELECT obj_description(t.oid, 'pg_trigger') INTO made FROM pg_trigger t
        WHERE t.tgrelid = 'docket_tasks'::regclass AND t.tgname = 'docket_task_events_upd';
    IF made IS NOT DISTINCT FROM qs THEN
        RETURN;
    END IF;
    DROP TRIGGER IF EXISTS docket_task_events_upd ON docket_tasks;
    EXECUTE format('CREATE TRIGGER docket_task_events_upd BEFORE UPDATE OF state ON docket_tasks '
        'FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.queue IN (%s)) '
        'EXECUTE FUNCTION docket_task_event()', qs);
    EXECUTE format('COMMENT ON TRIGGER docket_task_events_upd ON docket_tasks IS %L', qs);
END $$

-- name: task_event_delete
-- The rows a sink published ($1, a JSON array of seqs).
DELETE FROM docket_task_events WHERE seq IN (SELECT jsonb_array_elements_text($1::jsonb)::int8)
