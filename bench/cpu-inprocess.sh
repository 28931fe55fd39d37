#!/usr/bin/env bash
# Where the CPU goes when docket works N tasks in-process (`docket bench peer work N C PROFILE`,
# the peers harness's contender) on this machine's PostgreSQL (database bench_cpu, dropped and
# made again): wall time, CPU seconds of the docket process and of PostgreSQL (every backend,
# sampled every 0.5 s so ones that end are counted; the sampler costs a few percent of a core), and
# the WAL written. Issue 40 item 4. For a profile, run `perf record -a -g -- sleep 6` meanwhile.
#   bench/cpu-inprocess.sh                         # N=200000 C=24 PROFILE=strict
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/target/release/docket}
N=${N:-200000}; C=${C:-24}; PROFILE=${PROFILE:-strict}
DB=bench_cpu
PSQL="psql -h 127.0.0.1 -U postgres -qAt"
$PSQL -c "drop database if exists $DB with (force)" -c "create database $DB"
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB
"$BIN" bench peer setup >/dev/null
"$BIN" bench peer enqueue "$N" | grep RESULT
tck=$(getconf CLK_TCK)
declare -A seen
pg_sample() { for p in $(pgrep -u postgres postgres); do
  local v; v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null) || continue
  [ -n "$v" ] && seen[$p]=$v; done; }
pg_sum() { local t=0; for p in "${!seen[@]}"; do t=$((t + seen[$p])); done; echo $t; }
pg_sample; declare -A base; for p in "${!seen[@]}"; do base[$p]=${seen[$p]}; done
wal0=$($PSQL -c "select pg_current_wal_lsn()")
sysbusy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
b0=$(sysbusy); t0=$(date +%s.%N)
"$BIN" bench peer work "$N" "$C" "$PROFILE" > /tmp/cpu-inprocess.log 2>&1 &
DP=$!
dlast=0
while kill -0 $DP 2>/dev/null; do dlast=$(awk '{print $14+$15}' /proc/$DP/stat 2>/dev/null || echo $dlast); pg_sample; sleep 0.5; done
t1=$(date +%s.%N); b1=$(sysbusy); pg_sample
grep RESULT /tmp/cpu-inprocess.log
pg=0; for p in "${!seen[@]}"; do pg=$((pg + seen[$p] - ${base[$p]:-0})); done
wal=$($PSQL -c "select pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal0')")
awk -v w="$(echo "$t1 - $t0" | bc)" -v d=$dlast -v p=$pg -v b=$((b1-b0)) -v t=$tck -v wal="$wal" -v n="$N" 'BEGIN{
  printf "wall %.2fs  machine busy %.2fs of %.2fs  cpu: docket %.2fs  postgres %.2fs  WAL %.0f MB (%.0f bytes/task)\n", w, b/t, 2*w, d/t, p/t, wal/1e6, wal/n}'
