#!/usr/bin/env bash
# Builds and schema variants of the MySQL backend on the private tmpfs MariaDB (:3320):
# mariadbd's CPU per run and the bench's rates, variants alternating in each round.
#   VARIANTS="old full"   OLD_BIN=… : an older build (its own migrations) against BIN
#   VARIANTS="full notrig":            BIN's schema as migrated, and without the tag triggers
#                                      (0017's insert triggers, 0018's delete trigger on docket_tasks)
# ROUNDS, N, BIN (default target/debug/docket).
set -uo pipefail
BIN=${BIN:-target/debug/docket}
N=${N:-20000}
ROUNDS=${ROUNDS:-3}
PID=$(cat /dev/shm/mdb/pid)
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
m() { mariadb -h 127.0.0.1 -P 3320 -u root -N -B "$@"; }
for r in $(seq 1 $ROUNDS); do
  for v in ${VARIANTS:-full notrig}; do
    db=ab_${v}_$r
    m -e "drop database if exists $db; create database $db"
    url=mysql://root@127.0.0.1:3320/$db
    bin=$BIN; [ "$v" = old ] && bin=${OLD_BIN:?OLD_BIN: the docket binary of the older commit}
    $bin migrate --database "$url" >/dev/null 2>&1 || { echo "migrate failed"; exit 1; }
    case $v in
      notrig) m $db -e "drop trigger docket_tasks_tags_insert; drop trigger docket_tasks_done_tags_insert; drop trigger docket_tasks_delete; drop trigger docket_tasks_done_tags_delete" ;;
    esac
    c0=$(cpu)
    out=$($bin bench --database "$url" -n $N -c 10 --latency-secs 0 2>&1)
    c1=$(cpu)
    enq=$(grep -oP 'enqueue:\s+\K[0-9]+' <<<"$out"); wk=$(grep -oP 'worked:\s+\K[0-9]+' <<<"$out")
    echo "round $r $v: enqueue $enq/s worked $wk/s mariadbd cpu $(( (c1-c0)*10 )) ms for $N tasks"
    m -e "drop database $db"
  done
done
