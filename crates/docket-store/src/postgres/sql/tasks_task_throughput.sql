SELECT date_trunc('minute', finished_at) AS m,
    count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'discarded')
    FROM docket_tasks WHERE finished_at >= $1 AND state IN ('completed', 'discarded')
    GROUP BY m ORDER BY m
