-- name: publish
INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    VALUES (?, ?, ?, ?, ?, ?)

-- name: list
SELECT * FROM docket_notifications WHERE seq > ? AND (? IS NULL OR namespace = ?)
    ORDER BY seq LIMIT ?

-- name: sink_lease
UPDATE docket_sinks SET owner = ?, lease_until = ? WHERE name = ?
    AND (owner IS NULL OR owner = ? OR lease_until < ?)
