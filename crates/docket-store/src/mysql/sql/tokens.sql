-- name: create
INSERT INTO docket_tokens (name, hash, scopes, queues, created_at, expires_at)
    VALUES (?, ?, ?, ?, ?, ?)

-- name: get
SELECT {TOKEN_COLS} FROM docket_tokens WHERE id = ?

-- name: by_hash
SELECT {TOKEN_COLS} FROM docket_tokens WHERE hash = ?

-- name: list
SELECT {TOKEN_COLS} FROM docket_tokens ORDER BY id
