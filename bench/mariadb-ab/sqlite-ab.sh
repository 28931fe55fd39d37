#!/usr/bin/env bash
# An older build against the current one on SQLite (the database is in the process): the bench
# process's CPU (user + system) per run and its rates, a fresh file on tmpfs each run,
# alternating, each round reversing the last one's order.
#   OLD_BIN=… [BIN=target/debug/docket] [ROUNDS=3] [N=20000]
set -uo pipefail
BIN=${BIN:-target/debug/docket}
N=${N:-20000}
ROUNDS=${ROUNDS:-3}
D=$(mktemp -d /dev/shm/sqliteab.XXXXXX)
trap 'rm -rf "$D"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 == 0 )); then vs="new old"; else vs="old new"; fi
  for v in $vs; do
    rm -f "$D"/ab.db*
    url=sqlite://$D/ab.db
    bin=$BIN; [ "$v" = old ] && bin=${OLD_BIN:?OLD_BIN: the docket binary of the older commit}
    $bin migrate --database "$url" >/dev/null 2>&1 || { echo "migrate failed"; exit 1; }
    out=$(/usr/bin/time -f 'cpu %U %S' "$bin" bench --database "$url" -n "$N" -c 10 --latency-secs 0 2>&1)
    enq=$(grep -oP 'enqueue:\s+\K[0-9]+' <<<"$out"); wk=$(grep -oP 'worked:\s+\K[0-9]+' <<<"$out")
    ms=$(grep -oP '^cpu \K.*' <<<"$out" | awk '{printf "%d", ($1+$2)*1000}')
    echo "round $r $v: enqueue $enq/s worked $wk/s process cpu $ms ms for $N tasks"
  done
done
