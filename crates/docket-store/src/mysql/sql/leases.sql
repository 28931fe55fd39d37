-- name: complete_cancelled
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2, result = ?3,
    lease_expires_at = NULL, {runs:cancelled:finished_at} WHERE id = ?1

-- name: heartbeat_cancelled
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2,
    lease_expires_at = NULL, progress = COALESCE(?3, progress), {runs:cancelled:finished_at} WHERE id = ?1

-- name: heartbeat
-- No RETURNING: the task is read again.
UPDATE docket_tasks SET edited_at = IF(?2 IS NULL, edited_at, ?3),
    progress = COALESCE(?2, progress), lease_ms = COALESCE(?4, lease_ms),
    lease_expires_at = ?5 WHERE id = ?1

-- name: complete_to_next_stage
-- A held task (locked and checked first; the nonce ?2 is not read again) to its next stage.
UPDATE docket_tasks SET result = ?8,
    stages_done = JSON_ARRAY_APPEND(COALESCE(stages_done, JSON_ARRAY()), '$', stage),
    {runs:completed:?9},
    stage = ?5, attempt = 0, state = ?3, run_at = ?4, payload = COALESCE(?6, payload),
    priority = COALESCE(?7, priority), lease_expires_at = NULL
    WHERE id = ?1

-- name: fail
-- One failure (see the PostgreSQL statement; one row of DriverTx::update_each).
UPDATE docket_tasks SET state = ?4, run_at = ?5, finished_at = ?6,
    errors = JSON_ARRAY_APPEND(errors, '$', JSON_EXTRACT(?7, '$')),
    runs = JSON_ARRAY_APPEND(CASE WHEN JSON_LENGTH(COALESCE(runs, '[]')) >= ?1
        THEN JSON_REMOVE(runs, '$[0]') ELSE COALESCE(runs, JSON_ARRAY()) END, '$', JSON_EXTRACT(?8, '$')),
    run_count = run_count + 1,
    lease_expires_at = NULL WHERE id = ?3
    -- A rescue (?2): only a task still running the attempt it read, its lease still expired.
    AND (?2 IS NULL OR (state = 'running' AND attempt = ?9 AND lease_expires_at < ?2))

-- name: complete_held
-- Completes held tasks ?2 (locked and checked first: the nonces ?3 are not read again), each
-- with its result: the one of ?4 at its id's place in ?2.
UPDATE docket_tasks SET finished_at = ?1, lease_expires_at = NULL,
    run_count = run_count + 1, result = ELT(FIELD(id, ?2), ?4), state = 'completed'
    WHERE id IN (?2)

-- name: claim_candidates
-- The tasks a claim may take, in claim order, locked; of the kinds ?5 and stages ?6 unless
-- any (?7, ?8: asyncflow's hold by type and stage).
SELECT t.id, t.concurrency_key, t.concurrency_limit, t.rate_limit, t.timeout_ms,
    t.namespace IS NOT NULL AS process FROM docket_tasks t
    WHERE t.state = 'available' AND t.queue = ?1 AND (t.node IS NULL OR t.node = ?2) AND (?7 OR t.kind IN (?5)) AND (?8 OR t.stage IN (?6))
    AND (t.expires_at IS NULL OR t.expires_at > ?3)
    AND {affinity:t:?9:?3}
    AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r
        WHERE r.concurrency_key = t.concurrency_key AND r.state = 'running')
        < COALESCE(t.concurrency_limit, 1))
    -- Rate limits: keys blocked until later (window, bucket), or at their concurrent limit.
    AND (t.rate_limit IS NULL OR NOT EXISTS (SELECT 1 FROM docket_rate_limit_keys k
        JOIN docket_rate_limits p ON p.name = k.name WHERE k.`key` = t.rate_limit
        AND (k.blocked_until > ?3 OR (p.kind = 'concurrent' AND (SELECT count(*)
        FROM docket_tasks r WHERE r.rate_limit = k.`key` AND r.state = 'running') >= p.lim))))
    ORDER BY {claim_order:t} LIMIT ?4 FOR UPDATE SKIP LOCKED

-- name: claim_candidates_fair
-- A fair queue's candidates (issue 26 item 4): see the PostgreSQL statement. Read unlocked;
-- ?10 are the candidates another claim had locked (see docket_store::portable's claim).
SELECT c.* FROM (SELECT t.id, t.concurrency_key, t.concurrency_limit, t.rate_limit,
    t.timeout_ms, t.namespace IS NOT NULL AS process, t.partition_key, t.priority, t.attempt,
    t.run_at, CAST(row_number() OVER (PARTITION BY t.partition_key
    ORDER BY {claim_order:t}) AS SIGNED) AS rn FROM docket_tasks t
    WHERE t.state = 'available' AND t.queue = ?1 AND (t.node IS NULL OR t.node = ?2) AND (?7 OR t.kind IN (?5)) AND (?8 OR t.stage IN (?6))
    AND NOT COALESCE(t.id IN (?10), FALSE)
    AND (t.expires_at IS NULL OR t.expires_at > ?3)
    AND {affinity:t:?11:?3}
    AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r
        WHERE r.concurrency_key = t.concurrency_key AND r.state = 'running')
        < COALESCE(t.concurrency_limit, 1))
    -- Rate limits: keys blocked until later (window, bucket), or at their concurrent limit.
    AND (t.rate_limit IS NULL OR NOT EXISTS (SELECT 1 FROM docket_rate_limit_keys k
        JOIN docket_rate_limits p ON p.name = k.name WHERE k.`key` = t.rate_limit
        AND (k.blocked_until > ?3 OR (p.kind = 'concurrent' AND (SELECT count(*)
        FROM docket_tasks r WHERE r.rate_limit = k.`key` AND r.state = 'running') >= p.lim))))
    ) c WHERE c.rn <= ?9
    ORDER BY c.rn, {claim_order:c} LIMIT ?4

-- name: lock_available
-- Of the ids ?1, those still available and not locked by another claim, locked.
SELECT id FROM docket_tasks WHERE id IN (?1) AND state = 'available' FOR UPDATE SKIP LOCKED

-- name: claim
-- Starts the attempt of each picked task ?1 under the claim's nonce, its lease length and end
-- the ones of ?6 and ?7 at its id's place in ?1 (MySQL keeps no deadline: ?8 is not read).
-- Only tasks still available: the caller checks every picked one was (on Galera a row another
-- node claimed may be applied here between the pick and this update).
UPDATE docket_tasks SET attempt = attempt + 1, attempted_at = ?2, worker = ?3,
    lease_token = ?4, lease_ms = ELT(FIELD(id, ?1), ?6),
    lease_expires_at = ELT(FIELD(id, ?1), ?7),
    cancel_requested_at = NULL, state = 'running', attempt_node = ?5
    WHERE id IN (?1) AND state = 'available'

-- name: release_mark
-- A claim handed back by its worker: see the PostgreSQL statement.
INSERT IGNORE INTO docket_claim_releases (nonce, released_at) VALUES (?1, ?2)

-- name: release_lock
-- The running tasks under nonce ?1 (see the PostgreSQL statement), locked.
SELECT id, queue FROM docket_tasks WHERE state = 'running' AND lease_token = ?1
    AND (?2 IS NULL OR queue = ?2)
    AND (?3 IS NULL OR id IN (SELECT j.id FROM JSON_TABLE(?3, '$[*]' COLUMNS (id BIGINT PATH '$')) j))
    FOR UPDATE

-- name: release
-- Tasks ?1 (a JSON array of ids), joined rather than `id IN (SELECT …)`: see tasks.delete.
UPDATE docket_tasks t
    JOIN JSON_TABLE(?1, '$[*]' COLUMNS (id BIGINT PATH '$')) j ON t.id = j.id
    SET t.state = 'available', t.attempt = GREATEST(t.attempt - 1, 0),
    t.lease_token = NULL, t.lease_expires_at = NULL
    WHERE t.state = 'running'

-- name: archived
-- The finished tasks among the ids ?1 kept in docket_tasks_done (DriverTx::fetch_archived).
SELECT {COLS} FROM docket_tasks_done WHERE id IN (?1)

-- name: lock_held
-- Tasks ?1 (ids, in id order) locked (see the PostgreSQL statement); the finished ones in
-- docket_tasks_done are read apart (archived).
SELECT {COLS} FROM docket_tasks WHERE id IN (?1) ORDER BY id FOR UPDATE

-- name: limited_queues
SELECT name FROM docket_queues WHERE concurrency_limit IS NOT NULL AND name IN (?1)
