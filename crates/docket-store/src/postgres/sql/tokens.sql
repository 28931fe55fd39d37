-- name: create
INSERT INTO docket_tokens (name, hash, scopes, queues, created_at, expires_at)
    VALUES ($1, $2, $3, $4, $5, $6) RETURNING {TOKEN_COLS}

-- name: by_hash
SELECT {TOKEN_COLS} FROM docket_tokens WHERE hash = $1

-- name: list
SELECT {TOKEN_COLS} FROM docket_tokens ORDER BY id
