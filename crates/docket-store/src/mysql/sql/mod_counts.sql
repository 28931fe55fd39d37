SELECT queue, state, count(*) AS n FROM docket_tasks
    WHERE (? IS NULL OR queue = ?) GROUP BY queue, state
