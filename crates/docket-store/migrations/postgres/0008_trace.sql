-- W3C trace id of a task (32 hex digits), given by the enqueuer (traceparent / X-Trace-Id) or made up
-- at enqueue; carried to workers and their logs.
ALTER TABLE docket_tasks ADD COLUMN trace_id text;
