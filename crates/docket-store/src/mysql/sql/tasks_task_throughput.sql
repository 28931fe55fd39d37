SELECT CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)) AS m,
    CAST(SUM(state = 'completed') AS SIGNED) AS completed,
    CAST(SUM(state = 'discarded') AS SIGNED) AS failed
    FROM (SELECT finished_at, state FROM docket_tasks
        WHERE finished_at >= ? AND state IN ('completed', 'discarded')
        UNION ALL SELECT finished_at, state FROM docket_tasks_done
        WHERE finished_at >= ? AND state IN ('completed', 'discarded')) f
    GROUP BY m ORDER BY m
