-- A token's name holds up to 256 characters, as the API and the other backends allow: at 255
-- here, a 256-character name the API accepted failed on MySQL/MariaDB (issue 37 item 3).
ALTER TABLE docket_tokens
    MODIFY name VARCHAR(256) NOT NULL,
    MODIFY active_name VARCHAR(256) AS (CASE WHEN revoked_at IS NULL THEN name END) STORED;
