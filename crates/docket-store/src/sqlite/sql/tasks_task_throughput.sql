SELECT (finished_at / 60000000) * 60000000 AS m,
    sum(state = 'completed'), sum(state = 'discarded')
    FROM docket_tasks WHERE finished_at >= ?1 AND state IN ('completed', 'discarded')
    GROUP BY m ORDER BY m
