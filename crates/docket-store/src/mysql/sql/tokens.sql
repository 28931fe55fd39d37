-- name: create
INSERT INTO docket_tokens (name, hash, scopes, queues, created_at, expires_at)
    VALUES (?, ?, ?, ?, ?, ?)
