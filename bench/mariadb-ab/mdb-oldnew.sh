#!/usr/bin/env bash
# 3edb628 (before issue 43) vs the current build on the private tmpfs MariaDB (:3320): each
# with its own migrations; mariadbd's CPU per run and the bench's rates.
set -uo pipefail
N=${N:-20000}; ROUNDS=${ROUNDS:-3}
PID=$(cat /dev/shm/mdb/pid)
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
m() { mariadb -h 127.0.0.1 -P 3320 -u root -N -B "$@"; }
for r in $(seq 1 $ROUNDS); do
  for v in old new; do
    case $v in old) BIN=${OLD_BIN:?OLD_BIN: the docket binary of the older commit} ;; new) BIN=${NEW_BIN:-target/debug/docket} ;; esac
    db=on_${v}_$r
    m -e "drop database if exists $db; create database $db"
    url=mysql://root@127.0.0.1:3320/$db
    $BIN migrate --database "$url" >/dev/null 2>&1 || { echo "migrate failed"; exit 1; }
    c0=$(cpu)
    out=$($BIN bench --database "$url" -n $N -c 10 --latency-secs 0 2>&1)
    c1=$(cpu)
    enq=$(grep -oP 'enqueue:\s+\K[0-9]+' <<<"$out"); wk=$(grep -oP 'worked:\s+\K[0-9]+' <<<"$out")
    echo "round $r $v: enqueue $enq/s worked $wk/s mariadbd cpu $(( (c1-c0)*10 )) ms for $N tasks"
    m -e "drop database $db"
  done
done
