-- tokens: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/tokens.sql replaces the one here on that backend.

-- name: create
INSERT INTO docket_tokens (name, hash, scopes, queues, created_at, expires_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)

-- name: by_hash
SELECT {TOKEN_COLS} FROM docket_tokens WHERE hash = ?1

-- name: list
SELECT {TOKEN_COLS} FROM docket_tokens ORDER BY id

-- name: revoke
UPDATE docket_tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at IS NULL

-- name: touch
UPDATE docket_tokens SET last_used_at = ?2 WHERE id = ?1
