#!/usr/bin/env bash
# Chaos suite: runs thousands of tasks through 2 `docket serve` nodes and several
# `docket worker` processes while it kill -9s workers, kill -9s and restarts a node, SIGSTOPs a
# worker past its lease and strikes the database:
#   (default) a PostgreSQL cluster of its own (a temp dir, its own port), crashed with
#             `pg_ctl restart -m immediate`;
#   --galera  the three-node MariaDB Galera cluster of scripts/galera.sh, node a working through
#             Galera nodes 1,2,3 and node b through 2,1,3 (several hosts in the URL): a Galera
#             node killed with SIGKILL and started again, or cut off from the others (it becomes
#             non-primary and refuses queries) and let back, in turn;
#   --standby the PostgreSQL primary and synchronous standby of scripts/pg-standby.sh, both nodes
#             on postgres://…:5441,…:5442 with --strict-commit: the primary killed with SIGKILL
#             and the standby promoted (then the dead one rejoins as its standby), each time.
# Then it checks, through the API and from an append-only execution log written by the
# workers' command:
#   - no task lost: every task enqueued is in the table, and every one completed;
#   - none stuck: nothing left scheduled/available/running/retryable;
#   - none completed twice: the table holds one result per task;
#   - every execution beyond the first is explained by an injected fault: a later attempt after
#     a recorded failure (lease expired, exit by signal), or a repeat of the same attempt whose
#     claim a PostgreSQL crash forgot (claims commit with synchronous_commit = off; see docs/src/operations/deployment.md).
#     Those repeats are bounded: at most the attempts running when each crash struck (counted
#     right before it); with --strict, --galera or --standby none at all (every acknowledged
#     claim is durable: waited for the WAL flush, or certified by the Galera cluster, or on the
#     synchronous standby).
# Prints a table and exits non-zero when a check fails.
#
#   scripts/chaos.sh                 # the long run: 10,000 tasks, faults for up to 3 minutes
#   scripts/chaos.sh --short         # CI: 2,000 tasks, faults for up to 1 minute
#   scripts/chaos.sh --strict        # nodes run with --strict-commit (may follow --short)
#   scripts/chaos.sh --short --galera / --standby
#   CHAOS_TASKS=N CHAOS_SECONDS=S scripts/chaos.sh
# Needs PostgreSQL's server binaries (scripts/test.sh installs them) and root or the postgres
# user to run initdb; --galera and --standby start their clusters with their scripts. Only
# 127.0.0.1 is used.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

TASKS=${CHAOS_TASKS:-10000}
SECONDS_OF_FAULTS=${CHAOS_SECONDS:-180}
STRICT=""
MODE=pg
for a in "$@"; do
  case $a in
    --short) TASKS=${CHAOS_TASKS:-2000}; SECONDS_OF_FAULTS=${CHAOS_SECONDS:-60} ;;
    --strict) STRICT=--strict-commit ;;
    --galera) MODE=galera ;;
    --standby) MODE=standby; STRICT=--strict-commit ;;
    *) echo "usage: scripts/chaos.sh [--short] [--strict] [--galera|--standby]" >&2; exit 2 ;;
  esac
done
WORKERS=4
say() { echo "[chaos] $*" >&2; }

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PGBIN/initdb" ] || { say "PostgreSQL server binaries not found (run scripts/test.sh once)"; exit 1; }

# test.sh passes the binary `cargo test --workspace` built (DOCKET_BIN): building `-p docket`
# alone resolves features differently and would compile the dependencies a second time.
if [ -n "${DOCKET_BIN:-}" ]; then
  BIN=$DOCKET_BIN
else
  cargo build -q -p docket
  BIN=$ROOT/target/debug/docket
fi

WORK=$(mktemp -d /tmp/docket-chaos.XXXXXX)
chmod 755 "$WORK"
PGDATA=$WORK/pg
LOG=$WORK/executions.log
: > "$LOG"
chmod 666 "$LOG"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PGPORT=$(free_port)
PORT_A=$(free_port)
PORT_B=$(free_port)
DB="postgres://postgres@127.0.0.1:$PGPORT/postgres"
NAME="chaos_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
case $MODE in
  pg) DB_A=(--database "$DB"); DB_B=(--database "$DB") ;;
  galera)
    DB_A=(--database "mysql://root@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/$NAME")
    DB_B=(--database "mysql://root@127.0.0.1:3312,127.0.0.1:3311,127.0.0.1:3313/$NAME") ;;
  standby)
    DB_A=(--database "$("$ROOT/scripts/pg-standby.sh" urls)" --schema "$NAME"); DB_B=("${DB_A[@]}") ;;
esac

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

PIDS=()
cleanup() {
  set +e
  for p in "${PIDS[@]}"; do kill -9 -- "-$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  [ -n "${NODE_A:-}" ] && kill -9 "$NODE_A" 2>/dev/null
  [ -n "${NODE_B:-}" ] && kill -9 "$NODE_B" 2>/dev/null
  case $MODE in
    pg) as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 ;;
    galera)
      wait # a Galera node still starting again
      "$ROOT/scripts/galera.sh" start >/dev/null 2>&1
      mariadb -h 127.0.0.1 -P 3311 -u root -e "DROP DATABASE IF EXISTS $NAME" >/dev/null 2>&1 ;;
    standby)
      wait
      "$ROOT/scripts/pg-standby.sh" start >/dev/null 2>&1
      psql "postgresql://postgres@127.0.0.1:5441,127.0.0.1:5442/postgres?target_session_attrs=read-write" \
        -XAtqc "DROP SCHEMA IF EXISTS $NAME CASCADE" >/dev/null 2>&1 ;;
  esac
  if [ -z "${CHAOS_KEEP:-}" ]; then rm -rf "$WORK"; else say "kept $WORK"; fi
}
trap cleanup EXIT

pg_start() {
  as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -l "$WORK/pg.log" -w \
    -o "-p $PGPORT -k $WORK -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
}
case $MODE in
  pg)
    mkdir -p "$PGDATA"
    [ "$(id -u)" = 0 ] && chown postgres "$PGDATA" "$WORK"
    as_pg "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust >/dev/null
    pg_start ;;
  galera) "$ROOT/scripts/galera.sh" start ;;
  standby) "$ROOT/scripts/pg-standby.sh" start ;;
esac

# What the checks read, through a node's API (a node may be down a moment: ask the other).
api() { curl -fs -m 10 "http://127.0.0.1:$PORT_A$1" 2>/dev/null || curl -fs -m 10 "http://127.0.0.1:$PORT_B$1"; }
count() { # states (comma-separated) -> how many tasks of the queue are in them
  api /v1/queues/default | python3 -c 'import json,sys; c=json.load(sys.stdin)["counts"]; print(sum(c[s] for s in sys.argv[1].split(",")))' "$1" 2>/dev/null || echo "?"
}
UNFINISHED=scheduled,available,running,retryable,discarded,cancelled

start_node() { # name port -> pid
  local db=("${DB_A[@]}"); [ "$1" = b ] && db=("${DB_B[@]}")
  DOCKET_LOG=warn "$BIN" serve "${db[@]}" --listen "127.0.0.1:$2" --node "$1" \
    --rescue-interval 200ms --grace 2s $STRICT >>"$WORK/node-$1.log" 2>&1 &
  echo $!
}
wait_http() {
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  say "node on port $1 did not come up"; return 1
}
NODE_A=$(start_node a "$PORT_A"); wait_http "$PORT_A"
NODE_B=$(start_node b "$PORT_B"); wait_http "$PORT_B"

# The command: one line when it starts and one when it finishes (appends of a short line are
# atomic), then the result. A sleep of 0.5-0.9 s keeps many tasks in flight when the faults
# land (~45 tasks/s through 32 slots, so the run outlasts several faults).
CMD='echo "start $DOCKET_TASK_ID $DOCKET_TASK_ATTEMPT" >> '"$LOG"'; sleep 0.$((5 + RANDOM % 5)); echo "done $DOCKET_TASK_ID $DOCKET_TASK_ATTEMPT" >> '"$LOG"'; echo "{\"id\": $DOCKET_TASK_ID}"'
start_worker() { # index -> pid (own process group: kill -9 takes the command too)
  local port=$PORT_A
  [ $(( $1 % 2 )) = 1 ] && port=$PORT_B
  setsid env DOCKET_LOG=error DOCKET_SERVER="http://127.0.0.1:$port" "$BIN" worker \
    --concurrency 8 --lease 2s --kill-grace 1s -- sh -c "$CMD" >>"$WORK/worker-$1.log" 2>&1 &
  echo $!
}
for i in $(seq 0 $((WORKERS - 1))); do PIDS[$i]=$(start_worker "$i"); done

say "enqueueing $TASKS tasks (backoff 200ms) on node a"
python3 - "$TASKS" > "$WORK/tasks.jsonl" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({"kind": "chaos", "payload": i, "max_attempts": 50,
                      "backoff": {"initial": "200ms", "max": "2s", "jitter": 0.1}}))
PY
DOCKET_SERVER="http://127.0.0.1:$PORT_A" "$BIN" task add --file "$WORK/tasks.jsonl" --batch 1000 >/dev/null

declare -A FAULTS=([worker_kill]=0 [node_kill]=0 [pg_crash]=0 [worker_stop]=0 [galera_kill]=0 [galera_cut]=0 [failover]=0)
INFLIGHT=0 # attempts running right before each crash, summed: what a crash may make repeat
T0=$(date +%s)
next_node=6; next_pg=12; next_stop=3; galera_turn=0; galera_node=2
# The tasks completed now, "id attempt" a line (through the API, keyset pages).
completed_ids() { python3 "$ROOT/scripts/chaos_tasks.py" "$PORT_A" "$PORT_B" completed; }
# Before each strike at the database (not the PostgreSQL crash: relaxed claims and completions
# may be forgotten there by design), what was completed is kept with its attempt; at the end each
# of those must be completed at that same attempt — an acknowledged completion survives the strike
# (the snapshot is read through the API, so each was acknowledged before it). One that was lost
# would have gone back to running, its lease run out and a later attempt completed it.
SNAPSHOTS=0
snapshot() { completed_ids > "$WORK/completed-before-$SNAPSHOTS" && SNAPSHOTS=$(( SNAPSHOTS + 1 )) || true; }
db_fault() { # now
  case $MODE in
    pg)
      running=$(count running)
      INFLIGHT=$(( INFLIGHT + ${running//\?/0} ))
      say "t=${1}s PostgreSQL crash (pg_ctl restart -m immediate) with $running attempts running"
      as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
      sleep 1; pg_start
      FAULTS[pg_crash]=$(( FAULTS[pg_crash] + 1 )) ;;
    galera)
      wait # the node struck last is back before the next is struck
      snapshot
      if [ $(( galera_turn % 2 )) = 0 ]; then
        say "t=${1}s SIGKILL Galera node $galera_node, started again in 5 s"
        "$ROOT/scripts/galera.sh" kill "$galera_node"
        ( sleep 5; "$ROOT/scripts/galera.sh" start "$galera_node" >/dev/null 2>&1 ) &
        FAULTS[galera_kill]=$(( FAULTS[galera_kill] + 1 ))
      else
        say "t=${1}s Galera node $galera_node cut off from the others, back in 8 s"
        "$ROOT/scripts/galera.sh" isolate "$galera_node"
        ( sleep 8; "$ROOT/scripts/galera.sh" heal "$galera_node" >/dev/null 2>&1 ) &
        FAULTS[galera_cut]=$(( FAULTS[galera_cut] + 1 ))
      fi
      galera_turn=$(( galera_turn + 1 )); galera_node=$(( galera_node % 3 + 1 )) ;;
    standby)
      wait # the dead server rejoined before the next failover
      snapshot
      say "t=${1}s PostgreSQL failover: the primary killed with SIGKILL, the standby promoted"
      "$ROOT/scripts/pg-standby.sh" fail
      ( sleep 3; "$ROOT/scripts/pg-standby.sh" rejoin >/dev/null 2>&1 ) &
      FAULTS[failover]=$(( FAULTS[failover] + 1 )) ;;
  esac
}
while :; do
  now=$(( $(date +%s) - T0 ))
  left=$(count "$UNFINISHED")
  if [ "$now" -ge "$SECONDS_OF_FAULTS" ] || [ "$left" = 0 ]; then break; fi
  # kill -9 a random worker (and its command) every 2 s, and start a new one in its place
  i=$(( RANDOM % WORKERS ))
  kill -9 -- "-${PIDS[$i]}" 2>/dev/null || true
  PIDS[$i]=$(start_worker "$i"); FAULTS[worker_kill]=$(( FAULTS[worker_kill] + 1 ))
  if [ "$now" -ge "$next_stop" ]; then
    # SIGSTOP a worker past its 2 s lease, then let it go on: its reports must be refused.
    j=$(( (i + 1) % WORKERS ))
    kill -STOP -- "-${PIDS[$j]}" 2>/dev/null || true
    ( sleep 4; kill -CONT -- "-${PIDS[$j]}" 2>/dev/null || true ) &
    FAULTS[worker_stop]=$(( FAULTS[worker_stop] + 1 )); next_stop=$(( now + 15 ))
  fi
  if [ "$now" -ge "$next_node" ]; then
    say "t=${now}s kill -9 node a, back in 3 s"
    kill -9 "$NODE_A" 2>/dev/null || true
    ( sleep 3 ) ; NODE_A=$(start_node a "$PORT_A")
    FAULTS[node_kill]=$(( FAULTS[node_kill] + 1 )); next_node=$(( now + 20 ))
  fi
  if [ "$now" -ge "$next_pg" ]; then
    db_fault "$now"; next_pg=$(( now + 25 ))
  fi
  sleep 2
done
say "faults over at t=$(( $(date +%s) - T0 ))s; letting the cluster finish"
for i in "${!PIDS[@]}"; do kill -CONT -- "-${PIDS[$i]}" 2>/dev/null || true; done
wait_http "$PORT_A" || true
DEADLINE=$(( $(date +%s) + 120 ))
while :; do
  left=$(count "$UNFINISHED")
  [ "$left" = 0 ] && break
  [ "$(date +%s)" -ge "$DEADLINE" ] && break
  sleep 1
done
sleep 1 # the last log lines of commands that just finished

# Every task, through the API (keyset pages), in one pass: the counts and the per-task lines.
read -r total completed stuck discarded distinct_payloads bad_results \
  <<<"$(python3 "$ROOT/scripts/chaos_tasks.py" "$PORT_A" "$PORT_B" all "$WORK/tasks.tsv")"

# Completions acknowledged before a strike and not completed now.
lost_completions=0
if [ "$SNAPSHOTS" -gt 0 ]; then
  completed_ids | sort -u > "$WORK/completed-after"
  lost_completions=$(cat "$WORK"/completed-before-* | sort -u | comm -23 - "$WORK/completed-after" | wc -l)
  lost_completions=${lost_completions// /}
fi

BOUND=$INFLIGHT
{ [ -n "$STRICT" ] || [ "$MODE" != pg ]; } && BOUND=0
read -r executions extra same_attempt unexplained lost_log <<<"$(python3 - "$LOG" "$WORK/tasks.tsv" "$BOUND" <<'PY'
import sys, collections
log, tasks, bound = sys.argv[1], sys.argv[2], int(sys.argv[3])
done = collections.defaultdict(list)
for line in open(log):
    p = line.split()
    if len(p) == 3 and p[0] == "done":
        done[int(p[1])].append(int(p[2]))
attempt, errs = {}, {}
for line in open(tasks):
    i, a, e = map(int, line.split())
    attempt[i], errs[i] = a, e
executions = sum(len(v) for v in done.values())
extra = same = unexplained = 0
for i, atts in done.items():
    extra += len(atts) - 1
    c = collections.Counter(atts)
    for a, n in c.items():
        if n > 1:
            # the same attempt ran twice: only a forgotten claim (PostgreSQL crash) explains it
            same += n - 1
    # every attempt beyond the first must have left a recorded failure
    # (failures commit synchronously, so even a crash keeps them; only claims and
    # completions are relaxed)
    if i in attempt and len(set(atts)) > 1 and errs[i] < len(set(atts)) - 1:
        unexplained += 1
lost = sum(1 for i in attempt if i not in done)
# more repeats of one attempt than attempts were running at the crashes: not explained
unexplained += max(0, same - bound)
print(executions, extra, same, unexplained, lost)
PY
)"

fail=0
check() { # name value want
  local ok=PASS
  if [ "$2" != "$3" ]; then ok=FAIL; fail=1; fi
  printf '| %-46s | %10s | %8s | %s |\n' "$1" "$2" "$3" "$ok"
}
echo
echo "docket chaos ($MODE): $TASKS tasks, 2 nodes, $WORKERS workers x 8, ${SECONDS_OF_FAULTS}s of faults${STRICT:+, --strict-commit}"
case $MODE in
  pg) dbf="${FAULTS[pg_crash]} PostgreSQL crash" ;;
  galera) dbf="${FAULTS[galera_kill]} Galera node SIGKILL, ${FAULTS[galera_cut]} Galera node cut off" ;;
  standby) dbf="${FAULTS[failover]} PostgreSQL failover to the standby" ;;
esac
echo "faults: ${FAULTS[worker_kill]} worker kill -9, ${FAULTS[worker_stop]} worker SIGSTOP past lease, ${FAULTS[node_kill]} node kill -9, $dbf"
echo
printf '| %-46s | %10s | %8s | %s |\n' "check" "got" "want" ""
printf '|%s|%s|%s|%s|\n' "------------------------------------------------" "------------" "----------" "------"
check "tasks in the table (none lost)" "$total" "$TASKS"
check "distinct payloads (none lost or doubled)" "$distinct_payloads" "$TASKS"
check "completed" "$completed" "$TASKS"
check "stuck (scheduled/available/running/retryable)" "$stuck" 0
check "discarded or cancelled" "$discarded" 0
check "completed with another task's result" "$bad_results" 0
check "completed tasks with no execution logged" "$lost_log" 0
check "executions beyond the first, unexplained" "$unexplained" 0
[ "$MODE" != pg ] && check "completions acknowledged before a strike, lost" "$lost_completions" 0
printf '| %-46s | %10s | %8s | %s |\n' "executions logged" "$executions" "" ""
printf '| %-46s | %10s | %8s | %s |\n' "re-executions (all explained by faults)" "$extra" "" ""
same_ok=PASS; [ "$same_attempt" -le "$BOUND" ] || { same_ok=FAIL; fail=1; }
printf '| %-46s | %10s | %8s | %s |\n' "  of which the same attempt (crash)" "$same_attempt" "<= $BOUND" "$same_ok"
printf '| %-46s | %10s | %8s | %s |\n' "  attempts running at the crashes" "$INFLIGHT" "" ""
echo
if [ "$fail" != 0 ]; then
  say "FAILED; logs in $WORK"; CHAOS_KEEP=1; exit 1
fi
echo "chaos: $([ "$MODE" = pg ] && echo 9 || echo 10) passed, 0 failed"
