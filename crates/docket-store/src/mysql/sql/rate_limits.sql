-- Rate limits (issue 26 item 3, migration 0009): the named limits, and the keys a claim locks
-- and updates (crate::rate_limits). The rule is docket_core::rate_limit's.

-- name: put
INSERT INTO docket_rate_limits (name, kind, lim, period_ms, created_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?5)
    ON DUPLICATE KEY UPDATE kind = VALUES(kind), lim = VALUES(lim),
    period_ms = VALUES(period_ms), updated_at = VALUES(updated_at)

-- name: list
-- Every limit (?1 NULL) or one, with its keys' totals; n_blocked: keys blocked at ?2.
SELECT p.name, p.kind, p.lim, p.period_ms, p.created_at, p.updated_at,
    count(k.`key`) AS n_keys,
    CAST(p.admitted_total + COALESCE(sum(k.admitted_total), 0) AS SIGNED) AS n_admitted,
    CAST(p.delayed_total + COALESCE(sum(k.delayed_total), 0) AS SIGNED) AS n_delayed,
    CAST(COALESCE(sum(k.blocked_until > ?2), 0) AS SIGNED) AS n_blocked
    FROM docket_rate_limits p LEFT JOIN docket_rate_limit_keys k ON k.name = p.name
    WHERE ?1 IS NULL OR p.name = ?1
    GROUP BY p.name, p.kind, p.lim, p.period_ms, p.created_at, p.updated_at, p.admitted_total,
    p.delayed_total ORDER BY p.name

-- name: names
-- Which of the names in the JSON list ?1 are limits.
SELECT name FROM docket_rate_limits WHERE name IN (SELECT j.n FROM JSON_TABLE(?1, '$[*]'
    COLUMNS (n VARCHAR(100) PATH '$')) AS j) ORDER BY name

-- name: prune_lock
SELECT `key` FROM docket_rate_limit_keys
    WHERE touched_at < ?1 AND (blocked_until IS NULL OR blocked_until < ?1) FOR UPDATE

-- name: prune_fold
UPDATE docket_rate_limits p JOIN (SELECT name, CAST(sum(admitted_total) AS SIGNED) AS a,
    CAST(sum(delayed_total) AS SIGNED) AS d FROM docket_rate_limit_keys
    WHERE touched_at < ?1 AND (blocked_until IS NULL OR blocked_until < ?1) GROUP BY name) s
    ON p.name = s.name SET p.admitted_total = p.admitted_total + s.a, p.delayed_total = p.delayed_total + s.d

-- name: key_lock
-- A key's row, locked for the claim, with its limit (its running tasks: key_running, once the
-- lock is held). The limit is read by subqueries, which a locking clause does not reach: claims
-- of different keys of one limit do not queue on the limit's row (MariaDB has no FOR UPDATE OF).
SELECT k.`key`, k.at, k.used, k.name,
    (SELECT p.kind FROM docket_rate_limits p WHERE p.name = k.name) AS kind,
    (SELECT p.lim FROM docket_rate_limits p WHERE p.name = k.name) AS lim,
    (SELECT p.period_ms FROM docket_rate_limits p WHERE p.name = k.name) AS period_ms,
    (SELECT p.created_at FROM docket_rate_limits p WHERE p.name = k.name) AS created_at,
    (SELECT p.updated_at FROM docket_rate_limits p WHERE p.name = k.name) AS updated_at
    FROM docket_rate_limit_keys k
    WHERE k.`key` = ?1 AND EXISTS (SELECT 1 FROM docket_rate_limits p WHERE p.name = k.name)
    FOR UPDATE

-- name: key_running
-- How many tasks of key ?1 run now (a concurrent limit; read under the key's lock).
SELECT count(*) AS running FROM docket_tasks WHERE rate_limit = ?1 AND state = 'running'

-- name: key_ensure
-- The key's row, when its limit exists (?2 its name).
INSERT IGNORE INTO docket_rate_limit_keys (`key`, name, touched_at) SELECT ?1, ?2, ?3 FROM DUAL
    WHERE EXISTS (SELECT 1 FROM docket_rate_limits WHERE name = ?2)

-- name: key_update
UPDATE docket_rate_limit_keys SET at = ?2, used = ?3, blocked_until = ?4,
    admitted_total = admitted_total + ?5, delayed_total = delayed_total + ?6, touched_at = ?7 WHERE `key` = ?1
