-- API tokens (README "Security"): only the SHA-256 of each token is kept. A name is unique
-- among tokens not revoked; revoked ones stay for the audit trail.
CREATE TABLE docket_tokens (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    hash text NOT NULL UNIQUE,
    scopes jsonb NOT NULL,
    queues jsonb NOT NULL DEFAULT '[]',
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    revoked_at timestamptz,
    last_used_at timestamptz
);
CREATE UNIQUE INDEX docket_tokens_name ON docket_tokens (name) WHERE revoked_at IS NULL;
