-- What `docket bench` reads or writes besides docket's API: database state it measures, and
-- the pg_task bench's tasks. {table}: the pg_task table.

-- name: mysql_history_length
-- InnoDB's undo history (purge falls to a few entries when done with a preload).
SELECT CAST(count AS SIGNED) FROM information_schema.INNODB_METRICS
    WHERE name = 'trx_rseg_history_len'

-- name: pgtask_insert
INSERT INTO {table} ("group", input, max, count, "delete")
    SELECT $1, 'SELECT 1', $2, $3, false FROM generate_series(1, $4)

-- name: pg_churn_stats
-- The hot table is docket_tasks_live (unfinished tasks, migration 0020), since 0021 its
-- leaves: slot 0 and the ring docket_tasks_live_1..4; "all" adds the finished tasks' partition.
SELECT COALESCE(sum(n_dead_tup) FILTER (WHERE relname LIKE 'docket\_tasks\_live\_%'), 0)::int8,
    COALESCE(sum(n_live_tup) FILTER (WHERE relname LIKE 'docket\_tasks\_live\_%'), 0)::int8,
    COALESCE(sum(pg_total_relation_size(relid)) FILTER (WHERE relname LIKE 'docket\_tasks\_live\_%'), 0)::int8,
    COALESCE(sum(n_dead_tup), 0)::int8, COALESCE(sum(pg_total_relation_size(relid)), 0)::int8,
    COALESCE(sum(n_dead_tup) FILTER (WHERE relname = 'docket_tasks_live_0'), 0)::int8
    FROM pg_stat_user_tables WHERE schemaname = $1 AND relname LIKE 'docket\_tasks%'

-- name: pg_dead_tuples_scanned
SELECT COALESCE(sum((public.pgstattuple(c.oid)).dead_tuple_count), 0)::int8
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE 'docket\_tasks\_live\_%'
