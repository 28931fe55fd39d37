UPDATE docket_sinks SET owner = $2, lease_until = $3 WHERE name = $1
    AND (owner IS NULL OR owner = $2 OR lease_until < $4) RETURNING seq
