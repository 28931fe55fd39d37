-- Task lifecycle events for event sinks (issue 25). A sink that asks for a queue's task events
-- puts the queue in docket_task_event_queues and arms the triggers (notifications.sql
-- task_events_arm_*): from then on each change of a task's state in such a queue is copied here
-- in the transaction that makes it. Until some sink asks, no trigger exists and plain queues pay
-- nothing; after, other queues pay the trigger's WHEN test (the list of watched queues).
-- A sink deletes the rows it published; retention deletes the rest.
CREATE TABLE docket_task_events (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id bigint NOT NULL,
    queue text NOT NULL,
    kind text NOT NULL,
    from_state text,
    to_state text NOT NULL,
    attempt integer NOT NULL,
    from_stage text,
    stage text,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX docket_task_events_queue_idx ON docket_task_events (queue, seq);
CREATE TABLE docket_task_event_queues (queue text PRIMARY KEY);
-- The trigger (notifications.sql task_events_arm_update) names the watched queues in its WHEN
-- clause, so the rows of other queues never call this function. search_path is fixed to
-- docket's schema: plain-SQL writers with another search_path still find the table.
CREATE FUNCTION docket_task_event() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO docket_task_events (task_id, queue, kind, from_state, to_state, attempt,
        from_stage, stage)
    VALUES (NEW.id, NEW.queue, NEW.kind, OLD.state, NEW.state, NEW.attempt, OLD.stage, NEW.stage);
    RETURN NEW;
END $$;
