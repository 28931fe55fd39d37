#!/usr/bin/env bash
# An older build against the current one on the private tmpfs PostgreSQL (:5440, pg-private.sh):
# the server's CPU per run (the postmaster, its live children, and its exited backends) and the
# bench's rates, alternating, each round reversing the last one's order. A CHECKPOINT before
# each reading makes every run pay for the pages it dirtied and for nothing of another's.
#   OLD_BIN=… [BIN=target/debug/docket] [ROUNDS=3] [N=20000] [SETTLE=2]
set -uo pipefail
BIN=${BIN:-target/debug/docket}
N=${N:-20000}
ROUNDS=${ROUNDS:-3}
SETTLE=${SETTLE:-2}
PM=$(head -1 /dev/shm/pgab/data/postmaster.pid)
# utime+stime+cutime+cstime of the postmaster (its exited children land in cutime/cstime) and
# utime+stime of its live children, in clock ticks.
cpu() {
  local t
  t=$(awk '{print $14+$15+$16+$17}' /proc/"$PM"/stat)
  for c in $(pgrep -P "$PM"); do t=$((t + $(awk '{print $14+$15}' /proc/"$c"/stat 2>/dev/null || echo 0))); done
  echo "$t"
}
q() { psql -h 127.0.0.1 -p 5440 -U postgres -Atq "$@"; }
quiet() { q -c checkpoint; sleep "$SETTLE"; }
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 == 0 )); then vs="new old"; else vs="old new"; fi
  for v in $vs; do
    db=ab_${v}_$r
    q -c "drop database if exists $db" -c "create database $db"
    url=postgres://postgres@127.0.0.1:5440/$db
    bin=$BIN; [ "$v" = old ] && bin=${OLD_BIN:?OLD_BIN: the docket binary of the older commit}
    $bin migrate --database "$url" >/dev/null 2>&1 || { echo "migrate failed"; exit 1; }
    quiet
    c0=$(cpu)
    out=$($bin bench --database "$url" -n "$N" -c 10 --latency-secs 0 2>&1)
    quiet
    c1=$(cpu)
    enq=$(grep -oP 'enqueue:\s+\K[0-9]+' <<<"$out"); wk=$(grep -oP 'worked:\s+\K[0-9]+' <<<"$out")
    echo "round $r $v: enqueue $enq/s worked $wk/s postgres cpu $(( (c1-c0)*10 )) ms for $N tasks"
    q -c "drop database $db"
  done
done
