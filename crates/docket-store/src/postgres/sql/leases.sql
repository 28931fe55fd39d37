-- name: claim_candidates
SELECT t.id, t.concurrency_key, t.concurrency_limit, q.concurrency_limit AS queue_limit,
    t.rate_limit, t.timeout_ms, t.namespace IS NOT NULL AS process
    FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
    WHERE t.state = 'available' AND t.queue = $1
    AND (t.node IS NULL OR t.node = $2)
    AND ($7::boolean OR t.kind = ANY($5::text[]))
    AND ($8::boolean OR t.stage = ANY($6::text[]))
    AND (t.expires_at IS NULL OR t.expires_at > $3)
    AND {affinity:t:$9:$3}
    AND (q.paused IS NULL OR NOT q.paused)
    AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r
    WHERE r.state = 'running' AND r.concurrency_key = t.concurrency_key)
    < t.concurrency_limit)
    AND (t.rate_limit IS NULL OR NOT EXISTS (SELECT 1 FROM docket_rate_limit_keys k
    JOIN docket_rate_limits p ON p.name = k.name WHERE k.key = t.rate_limit
    AND (k.blocked_until > $3 OR (p.kind = 'concurrent' AND (SELECT count(*)
    FROM docket_tasks r WHERE r.state = 'running' AND r.rate_limit = k.key) >= p.lim))))
    ORDER BY {claim_order:t}
    LIMIT LEAST($4, COALESCE((SELECT schedule_limit FROM docket_queues WHERE name = $1), $4))
    FOR UPDATE OF t SKIP LOCKED

-- name: claim_candidates_fair
-- A fair queue's candidates (issue 26 item 4): the same filters, unlocked, each ranked within its
-- partition in claim order (rn); at most $9 per partition and $4 in all, none of the ids $10, by rank then claim
-- order. Each partition's first rows are locked as they are read (SKIP LOCKED: concurrent fair
-- claims take different rows, as plain ones do; the rank is over the rows this claim locked),
-- then the claim orders them by weight (docket_store::leases::Fairness) and keeps what it takes. The partitions with available tasks
-- are found by a skip scan of docket_tasks_fair_idx (one probe per partition), and each
-- partition's first $9 by the same index, so a claim reads partitions × $9 rows, not the
-- queue's whole backlog. Tasks without a partition are one more partition, looked for among the
-- queue's first 1,000 available tasks in claim order (the claim index; an index of their own
-- would cost every plain queue).
WITH RECURSIVE parts(pk) AS (
    SELECT min(t.partition_key) FROM docket_tasks t
    WHERE t.state = 'available' AND t.queue = $1 AND t.partition_key IS NOT NULL
    UNION ALL
    SELECT (SELECT min(t.partition_key) FROM docket_tasks t
        WHERE t.state = 'available' AND t.queue = $1 AND t.partition_key > p.pk)
    FROM parts p WHERE p.pk IS NOT NULL
)
SELECT c.* FROM (
    SELECT pr.* FROM parts pp CROSS JOIN LATERAL (SELECT x.*, row_number() OVER (ORDER BY {claim_order:x}) AS rn
        FROM (SELECT t.id, t.concurrency_key, t.concurrency_limit,
        q.concurrency_limit AS queue_limit, t.rate_limit, t.timeout_ms,
        t.namespace IS NOT NULL AS process, t.partition_key, t.priority, t.attempt, t.run_at
        FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
        WHERE t.state = 'available' AND t.queue = $1 AND t.partition_key = pp.pk
    AND (t.node IS NULL OR t.node = $2) AND NOT (t.id = ANY($10::bigint[]))
    AND ($7::boolean OR t.kind = ANY($5::text[]))
    AND ($8::boolean OR t.stage = ANY($6::text[]))
    AND (t.expires_at IS NULL OR t.expires_at > $3)
    AND {affinity:t:$11:$3}
    AND (q.paused IS NULL OR NOT q.paused)
    AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r
    WHERE r.state = 'running' AND r.concurrency_key = t.concurrency_key)
    < t.concurrency_limit)
    AND (t.rate_limit IS NULL OR NOT EXISTS (SELECT 1 FROM docket_rate_limit_keys k
    JOIN docket_rate_limits p ON p.name = k.name WHERE k.key = t.rate_limit
    AND (k.blocked_until > $3 OR (p.kind = 'concurrent' AND (SELECT count(*)
    FROM docket_tasks r WHERE r.state = 'running' AND r.rate_limit = k.key) >= p.lim))))
        ORDER BY {claim_order:t} LIMIT $9
        FOR UPDATE OF t SKIP LOCKED) x) pr
    WHERE pp.pk IS NOT NULL
    UNION ALL
    SELECT n.* FROM (SELECT x.*, row_number() OVER (ORDER BY {claim_order:x}) AS rn
        FROM (SELECT t.id, t.concurrency_key, t.concurrency_limit,
        q.concurrency_limit AS queue_limit, t.rate_limit, t.timeout_ms,
        t.namespace IS NOT NULL AS process, t.partition_key, t.priority, t.attempt, t.run_at
        FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
        WHERE t.id IN (SELECT f.id FROM docket_tasks f WHERE f.state = 'available'
            AND f.queue = $1 ORDER BY {claim_order:f} LIMIT 1000)
        AND t.state = 'available' AND t.queue = $1 AND t.partition_key IS NULL
    AND (t.node IS NULL OR t.node = $2) AND NOT (t.id = ANY($10::bigint[]))
    AND ($7::boolean OR t.kind = ANY($5::text[]))
    AND ($8::boolean OR t.stage = ANY($6::text[]))
    AND (t.expires_at IS NULL OR t.expires_at > $3)
    AND {affinity:t:$11:$3}
    AND (q.paused IS NULL OR NOT q.paused)
    AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r
    WHERE r.state = 'running' AND r.concurrency_key = t.concurrency_key)
    < t.concurrency_limit)
    AND (t.rate_limit IS NULL OR NOT EXISTS (SELECT 1 FROM docket_rate_limit_keys k
    JOIN docket_rate_limits p ON p.name = k.name WHERE k.key = t.rate_limit
    AND (k.blocked_until > $3 OR (p.kind = 'concurrent' AND (SELECT count(*)
    FROM docket_tasks r WHERE r.state = 'running' AND r.rate_limit = k.key) >= p.lim))))
        ORDER BY {claim_order:t} LIMIT $9
        FOR UPDATE OF t SKIP LOCKED) x) n
) c ORDER BY c.rn, {claim_order:c} LIMIT $4

-- name: lock_available
-- Of the ids $1, those still available and not locked by another claim, locked.
SELECT id FROM docket_tasks WHERE id = ANY($1) AND state = 'available' FOR UPDATE SKIP LOCKED

-- name: complete_held
UPDATE docket_tasks t SET state = 'completed', finished_at = $1, result = x.result,
    lease_expires_at = NULL, run_count = t.run_count + 1
    FROM unnest($2::bigint[], $3::uuid[], $4::jsonb[]) AS x(id, token, result)
    -- `(state = 'running') IS TRUE`, not `state = 'running'`: the planner cannot prove the
    -- lease index's predicate from it, so it finds each row by id. With the plain form, and
    -- the ring's slots believed nearly empty (they have no statistics), it scanned every
    -- running task of every slot for each id (auto_explain: up to 225 ms a batch, 3,000,000
    -- rows filtered for 1,000 completions). The IN list keeps the finished partition pruned.
    WHERE t.id = x.id AND t.lease_token = x.token
    AND t.state IN ('scheduled', 'available', 'running', 'retryable') AND (t.state = 'running') IS TRUE
    AND t.cancel_requested_at IS NULL
    -- Within the deadline the claim wrote (docket_core::lease::deadline_of; none for steps).
    AND (t.deadline_at IS NULL OR $1 < t.deadline_at)
    RETURNING t.id, t.run_at, t.queue, (t.concurrency_key IS NOT NULL OR t.rate_limit IS NOT NULL OR EXISTS (
    SELECT 1 FROM docket_queues q WHERE q.name = t.queue AND q.concurrency_limit IS NOT NULL)) AS frees,
    t.kind, t.attempted_at

-- name: complete_to_next_stage
UPDATE docket_tasks t SET state = $3, run_at = $4, stage = $5, payload = COALESCE($6, t.payload),
    priority = COALESCE($7, t.priority), result = $8, attempt = 0, lease_expires_at = NULL,
    stages_done = COALESCE(t.stages_done, '[]') || jsonb_build_array(t.stage),
    {runs:completed:$9}
    WHERE t.id = $1 AND t.lease_token = $2 AND t.state = 'running'
    AND t.cancel_requested_at IS NULL
    AND (t.deadline_at IS NULL OR $9 < t.deadline_at)
    RETURNING t.id, t.run_at, t.queue, (t.concurrency_key IS NOT NULL OR t.rate_limit IS NOT NULL OR EXISTS (
    SELECT 1 FROM docket_queues q WHERE q.name = t.queue AND q.concurrency_limit IS NOT NULL)) AS frees,
    t.kind, t.attempted_at

-- name: fail
-- Failures (docket_store::portable::apply_failures): the run log keeps $1 entries; each row
-- ($3.. as arrays, DriverTx::update_each) is id, state, run_at, finished_at, error, run, attempt.
UPDATE docket_tasks t SET state = x.state, run_at = x.run_at, finished_at = x.fin,
    errors = t.errors || jsonb_build_array(x.err), lease_expires_at = NULL,
    runs = (CASE WHEN jsonb_array_length(COALESCE(t.runs, '[]')) >= $1 THEN t.runs - 0
        ELSE COALESCE(t.runs, '[]') END) || jsonb_build_array(x.run::jsonb),
    run_count = t.run_count + 1
    FROM unnest($3::bigint[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::jsonb[],
    $8::text[], $9::int[]) AS x(id, state, run_at, fin, err, run, attempt)
    WHERE t.id = x.id
    -- A rescue ($2): only a task still running the attempt it read, its lease still expired.
    AND ($2::timestamptz IS NULL OR (t.state = 'running' AND t.attempt = x.attempt
        AND t.lease_expires_at < $2))
    RETURNING t.id

-- name: claim_fast
-- The whole claim in one statement (issue 24), run on a claim connection (session settings:
-- HOT_PATH_SETTINGS, synchronous_commit): the candidates in claim order, locked, and their
-- leases — unless one of them has a concurrency key, a rate limit or its queue a limit, or the
-- queue takes fair claims (then `fast_ok` is false, nothing is written, and the claim takes the
-- transaction below, which counts running tasks under locks). A fair queue's tasks are not even
-- locked here (concurrent fair claims would have to skip them); the test is uncorrelated, so it
-- is made once before the scan — as a join filter it read the fair queue's whole backlog. The lease is docket_core::lease::claim_lease: lease_ms the asked lease
-- ($7) else the timeout; the deadline now + timeout, none for a process step; the lease ends
-- at the earlier of now + lease and the deadline. A timeout over $10 ms (the caller passes
-- lease_ms under it) also takes the transaction, where the Rust rule's saturating arithmetic
-- applies: here it could overflow. The conformance case claim_leases_follow_the_rule holds
-- these values to the Rust rule on every backend.
WITH c AS (
    SELECT t.id AS c_id, t.concurrency_key AS c_key, q.concurrency_limit AS c_queue_limit,
        GREATEST(t.timeout_ms, 0) AS c_timeout, t.namespace IS NOT NULL AS c_process,
        t.rate_limit IS NOT NULL AS c_rate
    FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
    WHERE t.state = 'available' AND t.queue = $1
    AND NOT EXISTS (SELECT 1 FROM docket_queues fq WHERE fq.name = $1 AND fq.fair)
    AND (t.node IS NULL OR t.node = $2)
    AND ($5::text[] IS NULL OR t.kind = ANY($5))
    AND ($6::text[] IS NULL OR t.stage = ANY($6))
    AND (t.expires_at IS NULL OR t.expires_at > $3)
    AND {affinity:t:$11:$3}
    AND (q.paused IS NULL OR NOT q.paused)
    ORDER BY {claim_order:t}
    LIMIT LEAST($4, COALESCE((SELECT schedule_limit FROM docket_queues WHERE name = $1), $4))
    FOR UPDATE OF t SKIP LOCKED
), fast AS (
    SELECT NOT EXISTS (SELECT 1 FROM c WHERE c_key IS NOT NULL OR c_queue_limit IS NOT NULL
        OR c_rate OR c_timeout > $10)
        AND NOT EXISTS (SELECT 1 FROM docket_queues WHERE name = $1 AND fair) AS ok
), l AS (
    SELECT c_id, COALESCE($7::bigint, c_timeout) AS l_ms,
        CASE WHEN c_process THEN NULL ELSE $3 + c_timeout * interval '1 millisecond' END
        AS l_deadline
    FROM c, fast WHERE fast.ok
), u AS (
    UPDATE docket_tasks SET state = 'running', attempt = attempt + 1, attempted_at = $3,
        worker = $8, lease_token = $9, lease_ms = l.l_ms,
        lease_expires_at = LEAST($3 + l.l_ms * interval '1 millisecond',
            COALESCE(l.l_deadline, 'infinity')),
        deadline_at = l.l_deadline, cancel_requested_at = NULL, attempt_node = $2
    FROM l WHERE id = l.c_id RETURNING {COLS}
)
SELECT u.*, fast.ok AS fast_ok FROM fast LEFT JOIN u ON true

-- name: claim
UPDATE docket_tasks SET state = 'running', attempt = attempt + 1, attempted_at = $2,
    worker = $3, lease_token = $4, lease_ms = x.lease_ms_, lease_expires_at = x.expires_,
    deadline_at = x.deadline_, cancel_requested_at = NULL, attempt_node = $5
    FROM unnest($1::bigint[], $6::bigint[], $7::timestamptz[], $8::timestamptz[])
    AS x(id_, lease_ms_, expires_, deadline_)
    WHERE id = x.id_ AND id = ANY($1) RETURNING {COLS}

-- name: release_mark
-- A claim handed back by its worker (docket_store::Release::Claim): the claim's own check, run
-- right after it commits, reads this mark, so a release that overtook its claim still finds it.
INSERT INTO docket_claim_releases (nonce, released_at) VALUES ($1::uuid, $2)
    ON CONFLICT DO NOTHING

-- name: release_marked
-- Whether claim $1 was marked released (the claim's check; a plain read, no lock).
SELECT 1 AS marked FROM docket_claim_releases WHERE nonce = $1::uuid

-- name: release_lock
-- The running tasks under nonce $1 — of queue $2 unless NULL, among the ids of the JSON array $3
-- unless NULL — locked. Without ids the lease index (running tasks only) finds them.
SELECT id, queue FROM docket_tasks WHERE state = 'running' AND lease_token = $1::uuid
    AND ($2::text IS NULL OR queue = $2)
    AND ($3::jsonb IS NULL OR id IN (SELECT (jsonb_array_elements_text($3))::bigint))
    FOR UPDATE

-- name: release
-- The locked tasks (JSON array $1) as if never claimed: available, the attempt not counted.
UPDATE docket_tasks SET state = 'available', attempt = GREATEST(attempt - 1, 0),
    lease_token = NULL, lease_expires_at = NULL, deadline_at = NULL
    WHERE id IN (SELECT (jsonb_array_elements_text($1))::bigint) AND state = 'running'

-- name: lock_held
-- Tasks $1 (ids, in id order: one lock order for every caller) locked, for a call made under
-- their leases (docket_store::portable heartbeat, fail, complete).
SELECT {COLS} FROM docket_tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE

-- name: limited_queues
-- Which of the queues $1 have a concurrency limit (a completion frees one of their slots).
SELECT name FROM docket_queues WHERE concurrency_limit IS NOT NULL AND name = ANY($1)
