INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, expires_at,
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter,
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, created_at, trace_id,
    namespace, process_id, backoff_kind, user_id, stage, progress)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
    ?20, ?21, ?22, ?23, ?24, ?25)
    ON CONFLICT DO NOTHING RETURNING id
