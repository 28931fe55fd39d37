-- pg_task tables (seed 004): the statements docket runs on a user's task table. Slots filled
-- at run time: {table} (schema-qualified, quoted), {schema}, {func} and {trigger} (the wake-up
-- function and trigger), {channel}, {copied} (the columns a repeat copies), {filter}/{order}
-- (the dashboard's summaries).

-- name: columns
-- The columns a table already has (one made by hand or by an older pg_task keeps its own).
SELECT a.attname::text FROM pg_catalog.pg_attribute a
    JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped

-- name: wake_function
-- docket's own control sessions do not wake themselves: a statement trigger fires even for an
-- UPDATE of no rows, so each empty look at the table would wake the next one (a busy loop of
-- ~2,450 commits/s on an idle table). Their own changes are seen by the loop, which sleeps
-- until the next plan.
CREATE OR REPLACE FUNCTION {func}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF pg_catalog.current_setting('application_name') NOT LIKE 'docket control %' THEN
    PERFORM pg_catalog.pg_notify('{channel}', TG_RELID::text); END IF; RETURN NULL; END $$

-- name: wake_trigger
CREATE TRIGGER {trigger} AFTER INSERT OR UPDATE OF "plan", "state" ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION {func}()

-- name: claim
-- PLAN tasks that are due, group limits respected (`max` >= 0: max+1 at once; negative: one at
-- once), larger `max` first, then by id; taken to TAKE with this node's lock ($4). $5 true: the
-- next tasks for sessions that go on (`count`/`live`), which keep the slot they hold, so no
-- limit is counted. Returns the id, whether the lock was taken, then what the task runs with.
WITH running AS (SELECT "hash", count(*) AS n FROM {table}
        WHERE "state" IN ('TAKE', 'WORK') GROUP BY "hash"),
    cand AS (SELECT "id", "hash", "max",
            row_number() OVER (PARTITION BY "hash" ORDER BY "max" DESC, "id") AS rn
        FROM {table} WHERE "state" = 'PLAN' AND "plan" <= CURRENT_TIMESTAMP
        AND ($1::int4 IS NULL OR "hash" = $1) AND ($2::int4 IS NULL OR "max" >= $2)),
    pick AS (SELECT c."id" FROM cand c LEFT JOIN running r USING ("hash")
        WHERE CASE WHEN $5 THEN true
            WHEN c."max" >= 0 THEN COALESCE(r.n, 0) + c.rn <= c."max"::int8 + 1
            ELSE COALESCE(r.n, 0) = 0 AND c.rn = 1 END
        ORDER BY c."max" DESC, c."id" LIMIT $3)
UPDATE {table} t SET "state" = 'TAKE' FROM pick WHERE t."id" = pick."id"
RETURNING t."id", pg_catalog.pg_try_advisory_lock($4, (t."id" & 2147483647)::int4) AS locked,
    t."input", t."remote", t."hash", t."max", t."count",
    (extract(epoch FROM t."live") * 1000)::int8, t."save",
    (extract(epoch FROM t."timeout") * 1000)::int8, t."header", t."string",
    t."delimiter"::text, t."escape"::text, t."quote"::text, t."null"

-- name: repeat
-- The successor of repeating tasks: every copied column, parent = the task, planned at
-- now + repeat with `drift`, else on the grid plan + k*repeat (the first point after now).
INSERT INTO {table} ("parent", "plan", {copied})
    SELECT "id", CASE WHEN "drift" THEN CURRENT_TIMESTAMP + "repeat"
        ELSE "plan" + "repeat" * (floor(extract(epoch FROM CURRENT_TIMESTAMP - "plan")
            / extract(epoch FROM "repeat")) + 1) END,
    {copied} FROM {table} WHERE "id" = ANY($1) AND "repeat" > '0 sec'

-- name: reset
-- TAKE/WORK tasks whose session lock ($1 database, $2 table oid) nobody holds go back to PLAN.
UPDATE {table} t SET "state" = 'PLAN', "start" = NULL, "stop" = NULL, "pid" = NULL
    WHERE "state" IN ('TAKE', 'WORK') AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
        WHERE l.locktype = 'advisory' AND l.database = $1::int8::oid AND l.classid = $2::int8::oid
        AND l.objid = (t."id" & 2147483647)::oid AND l.objsubid = 2 AND l.granted)
    RETURNING "id"

-- name: gone
-- PLAN tasks past their active window end GONE.
UPDATE {table} SET "state" = 'GONE', "stop" = CURRENT_TIMESTAMP, "error" = $1
    WHERE "state" = 'PLAN' AND "plan" + "active" <= CURRENT_TIMESTAMP RETURNING "id"

-- name: start
UPDATE {table} SET "state" = 'WORK', "start" = CURRENT_TIMESTAMP, "pid" = $2
    WHERE "id" = $1 AND "state" = 'TAKE'

-- name: record_ends
-- Records the ends of tasks and lets their session locks ($5 the table oid) go, in one
-- statement.
UPDATE {table} t SET "state" = x.state::{schema}.state, "stop" = CURRENT_TIMESTAMP,
    "output" = x.output, "error" = x.error
    FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[]) AS x(id, state, output, error)
    WHERE t."id" = x.id AND t."state" IN ('TAKE', 'WORK')
    RETURNING t."id", t."delete", t."max", t."drift", t."start", t."hash",
    t."repeat" > '0 sec', pg_catalog.pg_advisory_unlock($5, (t."id" & 2147483647)::int4)

-- name: delete
DELETE FROM {table} WHERE "id" = ANY($1)

-- name: pause_group
-- Anti-parallel group (negative max): the next task starts |max| ms after this one — after its
-- end with drift ($2), else on the grid of its start ($4).
WITH n AS (SELECT CASE WHEN $2 THEN CURRENT_TIMESTAMP + $3 * interval '1 ms'
        ELSE COALESCE($4, CURRENT_TIMESTAMP) + $3 * interval '1 ms'
            * (floor(extract(epoch FROM CURRENT_TIMESTAMP - COALESCE($4, CURRENT_TIMESTAMP))
            * 1000 / $3) + 1) END AS at)
UPDATE {table} SET "plan" = n.at FROM n
    WHERE "hash" = $1 AND "state" = 'PLAN' AND "max" < 0 AND "plan" < n.at

-- name: let_go
-- Claimed tasks nobody will run go back to PLAN and their locks ($1 the table oid) go.
WITH b AS (UPDATE {table} SET "state" = 'PLAN' WHERE "id" = ANY($2) AND "state" = 'TAKE'
        RETURNING "id")
SELECT pg_catalog.pg_advisory_unlock($1, (id & 2147483647)::int4) FROM unnest($2::int8[]) AS id

-- name: counts
SELECT "state"::text, count(*) FROM {table} GROUP BY 1 ORDER BY 1

-- name: brief
SELECT "id", "group", left("input", 200), "state"::text, "plan", "stop",
    split_part("error", E'\n', 1)
    FROM {table} WHERE {filter} ORDER BY {order} LIMIT $1
