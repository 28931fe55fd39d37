-- name: claim_candidates
-- `fair`: the queue takes fair claims (claim_candidates_fair instead), read here so that a
-- plain queue's claim reads its queue's row only in this join.
SELECT t.id, t.concurrency_key, t.concurrency_limit, q.concurrency_limit AS queue_limit,
    t.rate_limit, t.timeout_ms, t.namespace IS NOT NULL AS process, COALESCE(q.fair, 0) AS fair
    FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
    WHERE t.state = 'available' AND t.queue = ?1
    AND (t.node IS NULL OR t.node = ?2)
    AND (?7 OR t.kind IN (SELECT value FROM json_each(?5)))
    AND (?8 OR t.stage IN (SELECT value FROM json_each(?6)))
    AND (t.expires_at IS NULL OR t.expires_at > ?3)
    AND {affinity:t:?9:?3}
    AND (q.paused IS NULL OR q.paused = 0)
    AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r
    WHERE r.state = 'running' AND r.concurrency_key = t.concurrency_key)
    < t.concurrency_limit)
    AND (t.rate_limit IS NULL OR NOT EXISTS (SELECT 1 FROM docket_rate_limit_keys k
    JOIN docket_rate_limits p ON p.name = k.name WHERE k.key = t.rate_limit
    AND (k.blocked_until > ?3 OR (p.kind = 'concurrent' AND (SELECT count(*)
    FROM docket_tasks r WHERE r.state = 'running' AND r.rate_limit = k.key) >= p.lim))))
    ORDER BY {claim_order:t}
    LIMIT min(?4, COALESCE((SELECT schedule_limit FROM docket_queues WHERE name = ?1), ?4))

-- name: claim_candidates_fair
-- A fair queue's candidates (issue 26 item 4): see the PostgreSQL statement. SQLite's writer
-- lock is held: nothing else can take them meanwhile.
SELECT c.* FROM (SELECT t.id, t.concurrency_key, t.concurrency_limit,
    q.concurrency_limit AS queue_limit, t.rate_limit, t.timeout_ms,
    t.namespace IS NOT NULL AS process, t.partition_key, t.priority, t.attempt, t.run_at,
    row_number() OVER (PARTITION BY t.partition_key
    ORDER BY {claim_order:t}) AS rn
    FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
    WHERE t.state = 'available' AND t.queue = ?1
    AND (t.node IS NULL OR t.node = ?2) AND t.id NOT IN (SELECT value FROM json_each(?10))
    AND (?7 OR t.kind IN (SELECT value FROM json_each(?5)))
    AND (?8 OR t.stage IN (SELECT value FROM json_each(?6)))
    AND (t.expires_at IS NULL OR t.expires_at > ?3)
    AND {affinity:t:?11:?3}
    AND (q.paused IS NULL OR q.paused = 0)
    AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r
    WHERE r.state = 'running' AND r.concurrency_key = t.concurrency_key)
    < t.concurrency_limit)
    AND (t.rate_limit IS NULL OR NOT EXISTS (SELECT 1 FROM docket_rate_limit_keys k
    JOIN docket_rate_limits p ON p.name = k.name WHERE k.key = t.rate_limit
    AND (k.blocked_until > ?3 OR (p.kind = 'concurrent' AND (SELECT count(*)
    FROM docket_tasks r WHERE r.state = 'running' AND r.rate_limit = k.key) >= p.lim))))
    ) c WHERE c.rn <= ?9
    ORDER BY c.rn, {claim_order:c} LIMIT ?4

-- name: complete_held
-- ?2, ?3, ?4: JSON arrays of the ids, nonces and results, item by item. The i-th nonce and
-- result are read by their path (a text result stays a JSON text), not by joining json_each
-- on the key: SQLite has no index for that join, and a batch of 1,000 read the other array
-- 1,000 times (the issue 39 SQLite regression, 35k -> 7.6k worked/s in docket bench).
UPDATE docket_tasks SET state = 'completed', finished_at = ?1, result = x.result,
    lease_expires_at = NULL, run_count = run_count + 1
    FROM (SELECT i.value AS id, ?3 ->> ('$[' || i.key || ']') AS token,
    ?4 -> ('$[' || i.key || ']') AS result FROM json_each(?2) i) AS x
    WHERE docket_tasks.id = x.id AND docket_tasks.lease_token = x.token
    AND docket_tasks.state = 'running' AND docket_tasks.cancel_requested_at IS NULL
    -- Within the deadline the claim wrote (docket_core::lease::deadline_of; none for steps).
    AND (docket_tasks.deadline_at IS NULL OR ?1 < docket_tasks.deadline_at)
    RETURNING docket_tasks.id, docket_tasks.run_at, docket_tasks.queue,
    (docket_tasks.concurrency_key IS NOT NULL OR docket_tasks.rate_limit IS NOT NULL OR EXISTS (SELECT 1 FROM docket_queues q
    WHERE q.name = docket_tasks.queue AND q.concurrency_limit IS NOT NULL)) AS frees,
    docket_tasks.kind, docket_tasks.attempted_at

-- name: complete_to_next_stage
UPDATE docket_tasks SET state = ?3, run_at = ?4, stage = ?5, payload = COALESCE(?6, payload),
    priority = COALESCE(?7, priority), result = ?8, attempt = 0, lease_expires_at = NULL,
    stages_done = json_insert(COALESCE(stages_done, '[]'), '$[#]', stage),
    {runs:completed:?9}
    WHERE id = ?1 AND lease_token = ?2 AND state = 'running' AND cancel_requested_at IS NULL
    AND (deadline_at IS NULL OR ?9 < deadline_at)
    RETURNING id, run_at, queue, (concurrency_key IS NOT NULL OR rate_limit IS NOT NULL OR EXISTS (SELECT 1
    FROM docket_queues q WHERE q.name = docket_tasks.queue AND q.concurrency_limit IS NOT NULL)) AS frees,
    kind, attempted_at

-- name: fail
-- One failure (see the PostgreSQL statement; one row of DriverTx::update_each).
UPDATE docket_tasks SET state = ?4, run_at = ?5, finished_at = ?6,
    errors = json_insert(errors, '$[#]', json(?7)), lease_expires_at = NULL,
    runs = json_insert(CASE WHEN json_array_length(COALESCE(runs, '[]')) >= ?1
        THEN json_remove(runs, '$[0]') ELSE COALESCE(runs, '[]') END, '$[#]', json(?8)),
    run_count = run_count + 1
    WHERE id = ?3
    -- A rescue (?2): only a task still running the attempt it read, its lease still expired.
    AND (?2 IS NULL OR (state = 'running' AND attempt = ?9 AND lease_expires_at < ?2))

-- name: claim
-- Each picked task's lease by docket_core::lease::claim_lease: ?1, ?6, ?7, ?8 are JSON arrays
-- of the ids, lease lengths, lease ends and deadlines (µs), item by item, the i-th read by its
-- path (see complete_held: a join of json_each on the key is quadratic).
UPDATE docket_tasks SET state = 'running', attempt = attempt + 1, attempted_at = ?2,
    worker = ?3, lease_token = ?4, lease_ms = x.lease_ms_, lease_expires_at = x.expires_,
    deadline_at = x.deadline_, cancel_requested_at = NULL, attempt_node = ?5
    FROM (SELECT i.value AS id_, ?6 ->> ('$[' || i.key || ']') AS lease_ms_,
    ?7 ->> ('$[' || i.key || ']') AS expires_, ?8 ->> ('$[' || i.key || ']') AS deadline_
    FROM json_each(?1) i) AS x
    WHERE docket_tasks.id = x.id_ RETURNING {COLS}

-- name: release_mark
-- A claim handed back by its worker: see the PostgreSQL statement.
INSERT OR IGNORE INTO docket_claim_releases (nonce, released_at) VALUES (?1, ?2)

-- name: release_lock
-- The running tasks under nonce ?1 (see the PostgreSQL statement); the write transaction locks.
SELECT id, queue FROM docket_tasks WHERE state = 'running' AND lease_token = ?1
    AND (?2 IS NULL OR queue = ?2)
    AND (?3 IS NULL OR id IN (SELECT value FROM json_each(?3)))

-- name: release
UPDATE docket_tasks SET state = 'available', attempt = MAX(attempt - 1, 0),
    lease_token = NULL, lease_expires_at = NULL, deadline_at = NULL
    WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'running'

-- name: lock_held
-- Tasks ?1 (a JSON array of ids); the write transaction locks.
SELECT {COLS} FROM docket_tasks WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id

-- name: limited_queues
SELECT name FROM docket_queues WHERE concurrency_limit IS NOT NULL
    AND name IN (SELECT value FROM json_each(?1))

-- name: lock_available
-- Of the ids ?1 (JSON), those still available (the writer lock is held: all of them).
SELECT id FROM docket_tasks WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'available'
