UPDATE docket_sinks SET owner = ?, lease_until = ? WHERE name = ?
    AND (owner IS NULL OR owner = ? OR lease_until < ?)
