#!/usr/bin/env bash
# docket as a contender of ../shared/bench/peers (contract: that folder's README).
#   CONTENDERS="graphile-worker $PWD/bench/contender" WORKLOADS="w1 w2" ../shared/bench/peers/run_all.sh
# The work is done by `docket bench peer …`: docket embedded as a library (in-process handlers,
# batched claim and batched completion), against $DATABASE_URL.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN="$ROOT/target/release/docket"
case "${1:-}" in
  install) (cd "$ROOT" && cargo build --release -q -p docket) ;;
  version) echo "docket $("$BIN" --version | cut -d' ' -f2) (sqlx 0.8.6, $(rustc --version | cut -d' ' -f1-2))" ;;
  variants)
    echo "c10 10 default 3"
    echo "c24 24 default 3"
    # The HTTP work path in the same process (docket bench --mode http): 10 loops claiming 1000
    # and completing them in one request — what the native clients' workers are held against.
    echo "c10-http 10 http 3"
    # Every commit waits for the WAL flush (docket serve --strict-commit): graphile-worker's
    # durability.
    echo "c10-strict 10 strict 3"
    echo "c24-strict 24 strict 3" ;;
  pending-sql) echo "select count(*) from docket_tasks where state not in ('completed','discarded','cancelled')" ;;
  setup) exec "$BIN" bench peer setup ;;
  enqueue) exec "$BIN" bench peer enqueue "$2" ;;
  work) exec "$BIN" bench peer work "$2" "$3" "$4" ;;
  latency) exec "$BIN" bench peer latency "$2" "$3" "$4" ;;
  *) echo "unknown command ${1:-}" >&2; exit 2 ;;
esac
