#!/usr/bin/env bash
# Two builds of the MySQL backend on the private tmpfs MariaDB (:3320):
# mariadbd's CPU per run and the bench's rates, variants alternating in each round.
#   VARIANTS="old full"   OLD_BIN=… : an older build (its own migrations) against BIN
#   (the tag-trigger A/B in bench/results/issue43-after-0018-20261130.md ran on ee988e6, whose
#   schema still had them, dropping them by hand; 0018 as landed has none)
# ROUNDS, N, BIN (default target/debug/docket).
set -uo pipefail
BIN=${BIN:-target/debug/docket}
N=${N:-20000}
ROUNDS=${ROUNDS:-3}
PID=$(cat /dev/shm/mdb/pid)
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
m() { mariadb -h 127.0.0.1 -P 3320 -u root -N -B "$@"; }
# Each run's CPU counts the flush of every page it dirtied and nothing of another's: before the
# first reading and again before the second, the buffer pool is flushed to no dirty page. Without
# it, a run paid for the checkpoint flush the last runs' redo forced (the 512 MB log fills about
# every other run), which read as 10-20% more CPU on alternate runs. Each round also reverses the
# last one's order, and the server gets SETTLE seconds (default 2) of quiet.
SETTLE=${SETTLE:-2}
flushed() {
  m -e "set global innodb_max_dirty_pages_pct = 0"
  for _ in $(seq 1 120); do
    [ "$(m -e "show global status like 'Innodb_buffer_pool_pages_dirty'" | cut -f2)" -eq 0 ] && break
    sleep 0.5
  done
  m -e "set global innodb_max_dirty_pages_pct = 90"
  sleep "$SETTLE"
}
order=(${VARIANTS:-old full})
for r in $(seq 1 $ROUNDS); do
  if (( r % 2 == 0 )); then vs=$(printf '%s\n' "${order[@]}" | tac); else vs="${order[*]}"; fi
  for v in $vs; do
    db=ab_${v}_$r
    m -e "drop database if exists $db; create database $db"
    url=mysql://root@127.0.0.1:3320/$db
    bin=$BIN; [ "$v" = old ] && bin=${OLD_BIN:?OLD_BIN: the docket binary of the older commit}
    $bin migrate --database "$url" >/dev/null 2>&1 || { echo "migrate failed"; exit 1; }
    flushed
    c0=$(cpu)
    out=$($bin bench --database "$url" -n $N -c 10 --latency-secs 0 2>&1)
    flushed
    c1=$(cpu)
    enq=$(grep -oP 'enqueue:\s+\K[0-9]+' <<<"$out"); wk=$(grep -oP 'worked:\s+\K[0-9]+' <<<"$out")
    echo "round $r $v: enqueue $enq/s worked $wk/s mariadbd cpu $(( (c1-c0)*10 )) ms for $N tasks"
    m -e "drop database $db"
  done
done
