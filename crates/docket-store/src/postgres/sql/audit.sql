-- The audit log of operator actions.

-- name: add
INSERT INTO docket_audit (at, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5)

-- name: list
SELECT id, at, actor, action, target, detail FROM docket_audit ORDER BY id DESC LIMIT $1
