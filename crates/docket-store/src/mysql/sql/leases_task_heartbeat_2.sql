UPDATE docket_tasks SET edited_at = IF(? IS NULL, edited_at, ?),
    progress = COALESCE(?, progress), lease_ms = COALESCE(?, lease_ms),
    lease_expires_at = ? WHERE id = ?
