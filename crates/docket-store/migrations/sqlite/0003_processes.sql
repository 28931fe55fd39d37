CREATE TABLE docket_namespaces (
    name TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE docket_processes (
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('init', 'running', 'error')),
    previous_status TEXT,
    status_changed_at INTEGER NOT NULL,
    detail TEXT,
    aux_state TEXT NOT NULL DEFAULT 'null',
    metadata TEXT NOT NULL DEFAULT '{}',
    corrupted_by INTEGER,
    created_at INTEGER NOT NULL,
    last_event_id INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX docket_processes_status_idx ON docket_processes (namespace, status, id);

CREATE TABLE docket_events (
    namespace TEXT NOT NULL,
    process_id TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    task_id INTEGER,
    timestamp INTEGER NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    payload TEXT NOT NULL DEFAULT 'null',
    PRIMARY KEY (namespace, process_id, event_id)
);

CREATE INDEX docket_tasks_unique_any_idx ON docket_tasks (unique_key) WHERE unique_key IS NOT NULL;
CREATE INDEX docket_tasks_key_waiting_idx ON docket_tasks (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
