#!/usr/bin/env bash
# Where the CPU goes when a native client's worker works N no-op tasks through docket serve
# (issue 40): the wall time, and CPU seconds of docket serve, the worker's process, PostgreSQL
# and the whole machine, read from /proc, with each one's microseconds per task. On this
# machine's PostgreSQL (127.0.0.1:5432, database bench_<client>_cpu, dropped and made again).
# Needs a release build (cargo build --release -p docket) and the client's bench install
# (bench/clients/<client>/bench.sh install).
#   bench/clients/cpu.sh                                  # CLIENT=typescript N=200000 C=24 PROFILE=prefetch
#   CLIENT=go bench/clients/cpu.sh; CLIENT=python N=100000 bench/clients/cpu.sh
#   CLIENT=http bench/clients/cpu.sh                      # the HTTP work path (docket bench peer work … http):
#                                                         # its worker runs inside docket's process
#   NODE_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" bench/clients/cpu.sh   # and a node profile
#   PY_FLAGS="-m cProfile -o /tmp/py.prof" CLIENT=python bench/clients/cpu.sh
#   GO_PROFILE=/tmp/go.pprof CLIENT=go bench/clients/cpu.sh     # and a Go CPU profile
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release/docket}
CLIENT=${CLIENT:-typescript}
N=${N:-200000}; C=${C:-24}; PROFILE=${PROFILE:-prefetch}
DB=bench_${CLIENT}_cpu
psql -h 127.0.0.1 -U postgres -qc "drop database if exists $DB with (force)" -c "create database $DB"
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB
"$BIN" bench peer setup >/dev/null
"$BIN" bench peer enqueue "$N" | grep RESULT
LOG=/tmp/$CLIENT-cpu-worker.log
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
sysbusy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
# PostgreSQL's CPU: every postgres process's ticks when first and last seen (sampled every 0.2 s,
# so a connection that opens and closes during the run is counted too, all but its last 0.2 s).
declare -A PG_FIRST PG_LAST
pgsample() {
  local p v
  for p in $(pgrep -u postgres postgres); do
    v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null) || continue
    [ -n "${PG_FIRST[$p]:-}" ] || PG_FIRST[$p]=${1:-$v}
    PG_LAST[$p]=$v
  done
}
pgcpu() { local t=0 p; for p in "${!PG_LAST[@]}"; do t=$((t + PG_LAST[$p] - PG_FIRST[$p])); done; echo $t; }
SP=
if [ "$CLIENT" != http ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$BIN" serve --database "$DATABASE_URL" --listen 127.0.0.1:$port --node cpu --auth off --rate-limit 0 >/tmp/$CLIENT-cpu-serve.log 2>&1 &
  SP=$!
  for _ in $(seq 100); do curl -fs http://127.0.0.1:$port/healthz >/dev/null && break; sleep 0.05; done
fi
SERVER=http://127.0.0.1:${port:-0}
s0=0; [ -n "$SP" ] && s0=$(cpu $SP)
pgsample; b0=$(sysbusy); t0=$(date +%s.%N)
case $CLIENT in
  typescript) exec node ${NODE_FLAGS:-} "$ROOT/bench/clients/typescript/bench.mjs" work "$SERVER" "$N" "$C" "$PROFILE" ;;
  python) exec "$ROOT/target/bench-python-venv/bin/python" ${PY_FLAGS:-} "$ROOT/bench/clients/python/bench.py" work "$SERVER" "$N" "$C" "$PROFILE" ;;
  go) DOCKET_BENCH_CPUPROFILE=${GO_PROFILE:-} exec "$ROOT/target/bench-go-worker" work "$SERVER" "$N" "$C" "$PROFILE" ;;
  http) exec "$BIN" bench peer work "$N" "$C" http ;;
  *) echo "CLIENT is typescript, python, go or http" >&2; exit 2 ;;
esac > "$LOG" 2>&1 &
WP=$!
wlast=0
while kill -0 $WP 2>/dev/null; do wlast=$(cpu $WP 2>/dev/null || echo $wlast); pgsample 0; sleep 0.2; done
wait $WP || { cat "$LOG" >&2; exit 1; }
t1=$(date +%s.%N); pgsample 0; b1=$(sysbusy)
s1=0; [ -n "$SP" ] && s1=$(cpu $SP)
grep RESULT "$LOG"
tck=$(getconf CLK_TCK)
awk -v w="$(echo "$t1 - $t0" | bc)" -v s=$((s1-s0)) -v n=$wlast -v p=$(pgcpu) -v b=$((b1-b0)) -v t=$tck -v N="$N" -v c="$CLIENT" 'BEGIN{
  printf "%s N=%d: wall %.2fs, %.0f tasks/s; machine busy %.2fs of %.2fs\n", c, N, w, N/w, b/t, 2*w
  printf "cpu s (us/task): docket serve %.2f (%.1f)  worker %.2f (%.1f)  postgres %.2f (%.1f)  machine %.2f (%.1f)\n",
    s/t, s/t*1e6/N, n/t, n/t*1e6/N, p/t, p/t*1e6/N, b/t, b/t*1e6/N}'
[ -n "$SP" ] && { kill $SP; wait $SP 2>/dev/null || true; }
exit 0
