-- name: publish
INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)

-- name: list
SELECT * FROM docket_notifications WHERE seq > ?1 AND (?2 IS NULL OR namespace = ?2)
    ORDER BY seq LIMIT ?3

-- name: last_seq
SELECT COALESCE(max(seq), 0) AS n FROM docket_notifications

-- name: sink_ensure
INSERT INTO docket_sinks (name) VALUES (?1) ON CONFLICT DO NOTHING

-- name: sink_lease
-- Takes (or keeps) the sink's delivery lease: free, ours, or run out at ?4.
UPDATE docket_sinks SET owner = ?2, lease_until = ?3 WHERE name = ?1
    AND (owner IS NULL OR owner = ?2 OR lease_until < ?4)

-- name: sink_seq
SELECT seq FROM docket_sinks WHERE name = ?1

-- name: sink_advance
UPDATE docket_sinks SET seq = ?3 WHERE name = ?1 AND owner = ?2

-- name: backlog
-- Undelivered notifications of a sink: how many (counted up to ?3) and the oldest one's time.
SELECT count(*) AS n, min(created_at) AS oldest FROM (SELECT created_at
    FROM docket_notifications WHERE namespace = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3) b
