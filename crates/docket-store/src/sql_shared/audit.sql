-- audit: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/audit.sql replaces the one here on that backend.

-- name: add
INSERT INTO docket_audit (at, actor, action, target, detail) VALUES (?1, ?2, ?3, ?4, ?5)

-- name: list
SELECT id, at, actor, action, target, detail FROM docket_audit ORDER BY id DESC LIMIT ?1
