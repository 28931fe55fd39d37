SELECT queue, state, count(*) AS n FROM docket_tasks
    WHERE ($1::text IS NULL OR queue = $1) GROUP BY queue, state
