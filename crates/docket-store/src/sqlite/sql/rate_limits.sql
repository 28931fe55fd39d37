-- Rate limits (issue 26 item 3, migration 0025): the named limits, and the keys a claim locks
-- and updates (crate::rate_limits). The rule is docket_core::rate_limit's.

-- name: list
-- Every limit (?1 NULL) or one, with its keys' totals; n_blocked: keys blocked at ?2.
SELECT p.name, p.kind, p.lim, p.period_ms, p.created_at, p.updated_at,
    count(k.key) AS n_keys, (p.admitted_total + COALESCE(sum(k.admitted_total), 0)) AS n_admitted,
    (p.delayed_total + COALESCE(sum(k.delayed_total), 0)) AS n_delayed,
    COALESCE(sum(k.blocked_until > ?2), 0) AS n_blocked
    FROM docket_rate_limits p LEFT JOIN docket_rate_limit_keys k ON k.name = p.name
    WHERE ?1 IS NULL OR p.name = ?1
    GROUP BY p.name ORDER BY p.name

-- name: names
-- Which of the names in the JSON list ?1 are limits.
SELECT name FROM docket_rate_limits WHERE name IN (SELECT value FROM json_each(?1)) ORDER BY name

-- name: prune_lock
SELECT key FROM docket_rate_limit_keys
    WHERE touched_at < ?1 AND (blocked_until IS NULL OR blocked_until < ?1)

-- name: prune_fold
UPDATE docket_rate_limits SET admitted_total = admitted_total + s.a, delayed_total = delayed_total + s.d
    FROM (SELECT name, sum(admitted_total) AS a, sum(delayed_total) AS d FROM docket_rate_limit_keys
    WHERE touched_at < ?1 AND (blocked_until IS NULL OR blocked_until < ?1) GROUP BY name) s
    WHERE docket_rate_limits.name = s.name

-- name: key_lock
-- A key's row with its limit (the claim holds the writer lock).
SELECT k.key, k.at, k.used, p.name, p.kind, p.lim, p.period_ms, p.created_at, p.updated_at
    FROM docket_rate_limit_keys k JOIN docket_rate_limits p ON p.name = k.name
    WHERE k.key = ?1

-- name: key_running
-- How many tasks of key ?1 run now (a concurrent limit).
SELECT count(*) AS running FROM docket_tasks WHERE state = 'running' AND rate_limit = ?1
