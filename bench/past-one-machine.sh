#!/usr/bin/env bash
# Throughput and pickup latency of docket past one database machine (issue 38), side by side in
# one run, each variant REPEATS times in turn (alternating, so a slow moment of the machine
# falls on all of them):
#   mariadb       one MariaDB (127.0.0.1:3306), three docket nodes
#   galera-1      the Galera cluster of scripts/galera.sh, the three docket nodes all writing
#                 through Galera node 1
#   galera-3      the same cluster, docket node i writing through Galera node i (several hosts
#                 in the URL: `docket bench --nodes 3` turns the list per node)
#   pg            one PostgreSQL (127.0.0.1:5432), three docket nodes
#   pg-standby    the primary and synchronous standby of scripts/pg-standby.sh (every commit
#                 waits for the standby), three docket nodes
# Every variant: `docket bench --mode http --nodes 3` (the workers spread over the three nodes),
# N tasks, C claim loops, then a pickup-latency phase. Starts both clusters when down; prints a
# table and writes it with the raw lines to bench/results/issue38-past-one-machine-DATE.md.
#   bench/past-one-machine.sh                 # N=20000 C=24 CB=100 REPEATS=2
#   N=50000 REPEATS=3 bench/past-one-machine.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
C=${C:-24}
REPEATS=${REPEATS:-2}
LAT=${LAT:-5}
# Claims of 100: with 24 loops claiming 1,000 each, MariaDB's completions of 1,000 rows took
# longer than the kept counts' 2 s window (docs: operations/counts.md) and the bench's count
# check failed there.
CB=${CB:-100}
BIN=${DOCKET_BIN:-target/release/docket}
[ -x "$BIN" ] || cargo build --release -p docket
scripts/galera.sh start >/dev/null
scripts/pg-standby.sh start >/dev/null
declare -A URL=(
  [mariadb]="mysql://root@127.0.0.1:3306/test"
  [galera-1]="mysql://root@127.0.0.1:3311/test"
  [galera-3]="mysql://root@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/test"
  [pg]="postgres://postgres@127.0.0.1:5432/postgres"
  [pg-standby]="$(scripts/pg-standby.sh urls)"
)
ORDER=(mariadb galera-1 galera-3 pg pg-standby)
RAW=$(mktemp)
for r in $(seq 1 "$REPEATS"); do
  for v in "${ORDER[@]}"; do
    echo "== $v run $r" | tee -a "$RAW" >&2
    "$BIN" bench --database "${URL[$v]}" -n "$N" -c "$C" --claim-batch "$CB" --mode http --nodes 3 \
      --latency-secs "$LAT" 2>&1 | tee -a "$RAW" >&2 || echo "(run failed)" >> "$RAW"
  done
done
OUT=${OUT:-bench/results/issue38-past-one-machine-$(date +%Y%m%d).md}
python3 - "$RAW" "$N" "$C" "$REPEATS" > "$OUT" <<'PY'
import re, sys, collections
raw, n, c, reps = sys.argv[1], *sys.argv[2:5]
runs = collections.defaultdict(list)
cur = None
for line in open(raw):
    m = re.match(r"== (\S+) run", line)
    if m:
        cur = m.group(1); runs[cur].append({}); continue
    m = re.search(r"worked:\s+(\d+) tasks/s", line)
    if m and cur: runs[cur][-1]["tps"] = int(m.group(1))
    m = re.search(r"pickup latency.*p50 ([\d.]+) ms\s+p95 ([\d.]+) ms\s+p99 ([\d.]+) ms", line)
    if m and cur: runs[cur][-1]["lat"] = m.groups()
print(f"# docket past one database machine: `bench/past-one-machine.sh` (N={n}, C={c}, claims of 100, {reps} runs each, alternating)\n")
print("`docket bench --mode http --nodes 3` on each: three docket nodes in one process, the claim loops spread over them; a 2-core machine, every database server on it too.\n")
print("| variant | worked tasks/s (each run) | pickup p50 / p95 / p99 ms (each run) |")
print("|---|---|---|")
for v, rs in runs.items():
    tps = " · ".join(str(r.get("tps", "failed")) for r in rs)
    lat = " · ".join("/".join(r["lat"]) if "lat" in r else "–" for r in rs)
    print(f"| {v} | {tps} | {lat} |")
print("\n## Raw\n\n```")
print(open(raw).read().rstrip())
print("```")
PY
rm -f "$RAW"
cat "$OUT" | sed -n '1,12p'
echo "written: $OUT" >&2
