SELECT queue, state, CAST(SUM(n) AS SIGNED) AS n FROM (
    SELECT queue, state, count(*) AS n FROM docket_tasks
        WHERE (? IS NULL OR queue = ?) GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*) AS n FROM docket_tasks_done
        WHERE (? IS NULL OR queue = ?) GROUP BY queue, state) c
    GROUP BY queue, state
