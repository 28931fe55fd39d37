-- name: publish
INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)

-- name: list
SELECT * FROM docket_notifications WHERE seq > ?1 AND (?2 IS NULL OR namespace = ?2)
    ORDER BY seq LIMIT ?3

-- name: sink_lease
UPDATE docket_sinks SET owner = ?2, lease_until = ?3 WHERE name = ?1
    AND (owner IS NULL OR owner = ?2 OR lease_until < ?4) RETURNING seq
