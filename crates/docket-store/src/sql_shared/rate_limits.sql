-- rate_limits: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/rate_limits.sql replaces the one here on that backend.

-- name: put
INSERT INTO docket_rate_limits (name, kind, lim, period_ms, created_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?5)
    ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, lim = excluded.lim,
    period_ms = excluded.period_ms, updated_at = excluded.updated_at

-- name: reset_keys
UPDATE docket_rate_limit_keys SET at = NULL, used = 0, blocked_until = NULL WHERE name = ?1

-- name: delete
DELETE FROM docket_rate_limits WHERE name = ?1

-- name: delete_keys
DELETE FROM docket_rate_limit_keys WHERE name = ?1

-- name: prune_delete
DELETE FROM docket_rate_limit_keys
    WHERE touched_at < ?1 AND (blocked_until IS NULL OR blocked_until < ?1)

-- name: key_ensure
-- The key's row, when its limit exists (?2 its name).
INSERT INTO docket_rate_limit_keys (key, name, touched_at) SELECT ?1, ?2, ?3
    WHERE EXISTS (SELECT 1 FROM docket_rate_limits WHERE name = ?2)
    ON CONFLICT (key) DO NOTHING

-- name: key_update
UPDATE docket_rate_limit_keys SET at = ?2, used = ?3, blocked_until = ?4,
    admitted_total = admitted_total + ?5, delayed_total = delayed_total + ?6, touched_at = ?7 WHERE key = ?1
