#!/usr/bin/env bash
# Where the CPU goes when the TypeScript client's worker works N tasks through docket serve
# (issue 40): the wall time, and CPU seconds of docket serve, node, PostgreSQL and the whole
# machine, read from /proc. On this machine's PostgreSQL (127.0.0.1:5432, database
# bench_ts_cpu, dropped and made again). Needs a release build and clients/typescript/dist.
#   bench/clients/cpu.sh                                   # N=200000 C=24 PROFILE=prefetch
#   NODE_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" bench/clients/cpu.sh   # and a node profile
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release/docket}
N=${N:-200000}; C=${C:-24}; PROFILE=${PROFILE:-prefetch}
DB=bench_ts_cpu
psql -h 127.0.0.1 -U postgres -qc "drop database if exists $DB with (force)" -c "create database $DB"
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB
"$BIN" bench peer setup >/dev/null
"$BIN" bench peer enqueue "$N" | grep RESULT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve --database "$DATABASE_URL" --listen 127.0.0.1:$port --node cpu --auth off --rate-limit 0 >/tmp/ts-cpu-serve.log 2>&1 &
SP=$!
for _ in $(seq 100); do curl -fs http://127.0.0.1:$port/healthz >/dev/null && break; sleep 0.05; done
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
sysbusy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
pgcpu() { local t=0; for p in $(pgrep -u postgres postgres); do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null || echo 0))); done; echo $t; }
s0=$(cpu $SP); p0=$(pgcpu); b0=$(sysbusy); t0=$(date +%s.%N)
node ${NODE_FLAGS:-} $ROOT/bench/clients/typescript/bench.mjs work http://127.0.0.1:$port "$N" "$C" "$PROFILE" > /tmp/ts-cpu-node.log 2>&1 &
NP=$!
nlast=0
while kill -0 $NP 2>/dev/null; do nlast=$(cpu $NP 2>/dev/null || echo $nlast); sleep 0.2; done
t1=$(date +%s.%N); s1=$(cpu $SP); p1=$(pgcpu); b1=$(sysbusy)
grep RESULT /tmp/ts-cpu-node.log
tck=$(getconf CLK_TCK)
awk -v w="$(echo "$t1 - $t0" | bc)" -v s=$((s1-s0)) -v n=$nlast -v p=$((p1-p0)) -v b=$((b1-b0)) -v t=$tck 'BEGIN{printf "machine busy %.2fs  ", b/t; printf "wall %.2fs  cpu: docket serve %.2fs  node %.2fs  postgres %.2fs (2 cores = %.2fs)\n", w, s/t, n/t, p/t, 2*w}'
kill $SP; wait $SP 2>/dev/null || true
