#!/usr/bin/env bash
# The tag filter at 10M tasks on PostgreSQL (issue 43): fills a database of its own with N
# tasks (default 10,000,000: 90% tagged `customer:<g mod 100000>`, `plan:<g mod 3>` and
# `region:<g mod 500>`, a tenth
# untagged; a tenth waiting, the rest completed, in ten queues), through docket's own migrations,
# then times `task_list` with a tag (examples/tag_filter_bench.rs, release build) and writes
# bench/results/tags-<date>.json. Builds what it needs.
#   PG_URL   a PostgreSQL server [postgres://postgres@127.0.0.1:5432]; database docket_tagbench
#            is dropped and made again
#   N        tasks [10000000]
#   CALLS    timed calls per kind of query [500]
#   OUT      the results [bench/results/tags-<date>.json]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432}
N=${N:-10000000}
DB=docket_tagbench
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
cargo build -q --release -p docket -p docket-engine --example tag_filter_bench --bin docket
psql "$PG_URL/postgres" -XAtqc "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
"$CARGO_TARGET_DIR/release/docket" migrate --database "$PG_URL/$DB" --schema tb >/dev/null
t0=$(date +%s)
# The GIN index is made once after the fill (as a restore would), not row by row.
psql "$PG_URL/$DB" -XAtq -v ON_ERROR_STOP=1 <<SQL
DROP INDEX tb.docket_tasks_tags_idx;
DO \$\$
DECLARE lo bigint := 1;
BEGIN
  WHILE lo <= $N LOOP
    INSERT INTO tb.docket_tasks (queue, kind, payload, state, run_at, created_at, finished_at,
        attempt, tags)
    SELECT 'q' || (g % 10), 'k', jsonb_build_object('n', g),
        CASE WHEN g % 10 = 0 THEN 'available' ELSE 'completed' END,
        now() - interval '1 day', now() - interval '1 day',
        CASE WHEN g % 10 = 0 THEN NULL ELSE now() - interval '1 day' + g * interval '1 ms' END,
        CASE WHEN g % 10 = 0 THEN 0 ELSE 1 END,
        CASE WHEN g % 10 = 9 THEN NULL
            ELSE jsonb_build_array('customer:' || (g % 100000), 'plan:' || (g % 3),
                'region:' || (g % 500)) END
    FROM generate_series(lo, least(lo + 999999, $N)) g;
    lo := lo + 1000000;
    COMMIT;
  END LOOP;
END \$\$;
CREATE INDEX docket_tasks_tags_idx ON tb.docket_tasks USING gin (tags jsonb_path_ops)
    WHERE tags IS NOT NULL;
ANALYZE tb.docket_tasks;
SQL
echo "filled $N tasks in $(( $(date +%s) - t0 )) s" >&2
mkdir -p bench/results
OUT=${OUT:-bench/results/tags-$(date +%Y%m%d).json} DATABASE_URL="$PG_URL/$DB" SCHEMA=tb \
  "$CARGO_TARGET_DIR/release/examples/tag_filter_bench"
psql "$PG_URL/$DB" -XAtc "SELECT pg_size_pretty(pg_database_size('$DB'))" >&2
