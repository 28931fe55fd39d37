-- Durable processes (progressor). A process's tasks live in docket_tasks (queue
-- 'process:<namespace>', concurrency_key '<namespace>:<id>', limit 1).
CREATE TABLE docket_namespaces (
    name text PRIMARY KEY,
    config jsonb NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE docket_processes (
    namespace text NOT NULL,
    id text NOT NULL,
    status text NOT NULL CHECK (status IN ('init', 'running', 'error')),
    previous_status text,
    status_changed_at timestamptz NOT NULL,
    detail text,
    aux_state jsonb NOT NULL DEFAULT 'null',
    metadata jsonb NOT NULL DEFAULT '{}',
    corrupted_by bigint,
    created_at timestamptz NOT NULL,
    last_event_id bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX docket_processes_status_idx ON docket_processes (namespace, status, id);

CREATE TABLE docket_events (
    namespace text NOT NULL,
    process_id text NOT NULL,
    event_id bigint NOT NULL,
    task_id bigint,
    timestamp timestamptz NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}',
    payload jsonb NOT NULL DEFAULT 'null',
    PRIMARY KEY (namespace, process_id, event_id)
);

-- Idempotency keys answer with the stored response also after the task finished.
CREATE INDEX docket_tasks_unique_any_idx ON docket_tasks (unique_key) WHERE unique_key IS NOT NULL;
-- A process's waiting tasks (timers to cancel, calls to cancel when it breaks).
CREATE INDEX docket_tasks_key_waiting_idx ON docket_tasks (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
