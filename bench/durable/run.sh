#!/usr/bin/env bash
# Durable-functions bench (issue 41): workflows of 3 no-op steps started by STARTERS concurrent
# starters; workflows completed per second and the time per step. See README.md beside this file.
#
#   bench/durable/run.sh                                   # every contender, N=2000, 3 runs each
#   CONTENDERS="dbos-py dbos-ts" N=2000 REPEATS=3 bench/durable/run.sh
#
# Knobs: N (2000), STARTERS (10), REPEATS (3), CONTENDERS ("dbos-py dbos-ts docket-py docket-ts";
# also docket-py-eager and docket-ts-eager: the docket worker with deferred step entries off;
# dbos-py-queue: DBOS Python's queue API; docket-rs, docket-rs-eager: the Rust library, the
# engine embedded, DOCKET_RS_BIN),
# RESULTS_DIR (bench/results/durable-<date>), PG_URL (postgres://postgres@127.0.0.1:5432, the
# cluster; a database docket_durable_<contender>_<repeat> is created per run and dropped after),
# DOCKET_BIN (target/release/docket; this script does not build it), WORKER_CONC (docket
# contenders' worker concurrency, 100), RUN_TIMEOUT (seconds per run, 900), DURABLE_CACHE
# (~/.cache/docket-bench/durable: the venvs and node_modules installed here), SKIP_INSTALL (0).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
N=${N:-2000}; STARTERS=${STARTERS:-10}; REPEATS=${REPEATS:-3}
CONTENDERS=${CONTENDERS:-"dbos-py dbos-ts docket-py docket-ts"}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/durable-$(date +%Y%m%d)}
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432}
DOCKET_BIN=${DOCKET_BIN:-$ROOT/target/release/docket}
DOCKET_RS_BIN=${DOCKET_RS_BIN:-$ROOT/target/release/examples/durable_bench}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
CACHE=${DURABLE_CACHE:-$HOME/.cache/docket-bench/durable}
SKIP_INSTALL=${SKIP_INSTALL:-0}
DBOS_PY_VERSION=${DBOS_PY_VERSION:-3.4.*}
DBOS_TS_VERSION=${DBOS_TS_VERSION:-~5.3.0}
export N STARTERS WORKER_CONC=${WORKER_CONC:-100} DURABLE_CACHE=$CACHE DOCKET_ROOT=$ROOT
export PGOPTIONS="-c client_min_messages=warning"
mkdir -p "$CACHE" "$RESULTS_DIR"
RESULTS_DIR=$(cd "$RESULTS_DIR" && pwd)

log() { echo "[durable $(date +%H:%M:%S)] $*" >&2; }
psql_admin() { psql "$PG_URL/postgres" -v ON_ERROR_STOP=1 -qAtc "$1"; }

# --- installs (idempotent) ---------------------------------------------------------------------
install_dbos_py() {
  [ -x "$CACHE/venv/bin/python" ] || python3 -m venv "$CACHE/venv"
  "$CACHE/venv/bin/python" - "$DBOS_PY_VERSION" <<'EOF' || "$CACHE/venv/bin/pip" install -q "dbos==$DBOS_PY_VERSION"
import fnmatch, sys
from importlib.metadata import version
sys.exit(0 if fnmatch.fnmatch(version("dbos"), sys.argv[1]) else 1)
EOF
}
install_dbos_ts() {
  [ -f "$CACHE/package.json" ] || echo '{"name":"docket-durable-bench","private":true}' >"$CACHE/package.json"
  if ! node -e 'const v=require(process.argv[1]).version; process.exit(v.startsWith(process.argv[2].replace(/^~/,"").split(".").slice(0,2).join(".")+".")?0:1)' \
      "$CACHE/node_modules/@dbos-inc/dbos-sdk/package.json" "$DBOS_TS_VERSION" 2>/dev/null; then
    (cd "$CACHE" && npm install --no-audit --no-fund -s "@dbos-inc/dbos-sdk@$DBOS_TS_VERSION")
  fi
}
need_docket_bin() {
  [ -x "$DOCKET_BIN" ] || { log "no docket binary at $DOCKET_BIN (build it: cargo build --release -p docket, or set DOCKET_BIN)"; return 1; }
}
install_docket_py() {
  need_docket_bin || return 1
  [ -x "$CACHE/venv-docket/bin/python" ] || python3 -m venv "$CACHE/venv-docket"
  # Installed from a copy, so that setuptools' build/ and egg-info stay out of clients/python;
  # reinstalled every time (the client changes under us).
  local tmp; tmp=$(mktemp -d); cp -r "$ROOT/clients/python" "$tmp/python"
  rm -rf "$tmp/python/build" "$tmp/python/src/"*.egg-info
  "$CACHE/venv-docket/bin/pip" install -q "$tmp/python"
  "$CACHE/venv-docket/bin/pip" install -q --force-reinstall --no-deps "$tmp/python"
  rm -rf "$tmp"
}
install_docket_rs() {
  [ -x "$DOCKET_RS_BIN" ] || { log "no $DOCKET_RS_BIN (build it: cargo build --release -p docket-engine --example durable_bench)"; return 1; }
}
install_docket_ts() {
  need_docket_bin || return 1
  [ -f "$ROOT/clients/typescript/dist/index.js" ] || {
    log "clients/typescript/dist/index.js is missing: build the client first (cd clients/typescript && npm ci && npm run build)"
    return 1; }
}

# --- one run -----------------------------------------------------------------------------------
SERVE_PID=""
serve_start() { # $1 database url, $2 log file; sets DOCKET_SERVER and SERVE_PID
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$DOCKET_BIN" serve --database "$1" --listen "127.0.0.1:$port" --node bench-durable \
    --auth off --rate-limit 0 >"$2" 2>&1 &
  SERVE_PID=$!
  export DOCKET_SERVER="http://127.0.0.1:$port"
  for _ in $(seq 1 400); do
    curl -fs "$DOCKET_SERVER/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.05
  done
  log "docket serve did not come up:"; tail -20 "$2" >&2; return 1
}
serve_stop() {
  [ -n "$SERVE_PID" ] || return 0
  kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=""
}
CUR_DB=""
cleanup() { serve_stop; [ -z "$CUR_DB" ] || psql_admin "drop database if exists $CUR_DB with (force)" || true; }
trap cleanup EXIT

run_one() { # $1 contender, $2 repeat
  local name=$1 rep=$2 db out logf cmd=() serve_args=()
  db="docket_durable_${name//-/_}_$rep"; out="$RESULTS_DIR/$name-$rep.json"; logf="$RESULTS_DIR/$name-$rep.log"
  rm -f "$out"
  psql_admin "drop database if exists $db with (force)"
  psql_admin "create database $db"
  CUR_DB=$db
  psql_admin "checkpoint"
  export DATABASE_URL="$PG_URL/$db" OUT="$out" CONTENDER="$name"
  case "$name" in
    dbos-py) cmd=("$CACHE/venv/bin/python" "$HERE/dbos_py.py") ;;
    # DBOS's queue API instead of start_workflow (DBOS_QUEUE_CONC, DBOS_QUEUE_POLL: see dbos_py.py).
    dbos-py-queue) cmd=(env DBOS_PY_MODE=queue "$CACHE/venv/bin/python" "$HERE/dbos_py.py") ;;
    dbos-ts) cmd=(node "$HERE/dbos_ts.mjs") ;;
    docket-py) cmd=("$CACHE/venv-docket/bin/python" "$HERE/docket_py.py") ;;
    docket-ts) cmd=(node "$HERE/docket_ts.mjs") ;;
    # The Rust library: the engine embedded in the contender, no docket serve.
    docket-rs) cmd=("$DOCKET_RS_BIN") ;;
    docket-rs-eager) cmd=(env DOCKET_DEFER_STEPS=0 "$DOCKET_RS_BIN") ;;
    # Each step's entry sent as the step ends (the worker's deferSteps off): like DBOS, a step is
    # recorded before its call returns.
    docket-py-eager) cmd=(env DOCKET_DEFER_STEPS=0 "$CACHE/venv-docket/bin/python" "$HERE/docket_py.py") ;;
    docket-ts-eager) cmd=(env DOCKET_DEFER_STEPS=0 node "$HERE/docket_ts.mjs") ;;
    *) log "unknown contender $name"; return 1 ;;
  esac
  if [[ $name == docket-* && $name != docket-rs* ]]; then
    serve_start "$DATABASE_URL" "$RESULTS_DIR/$name-$rep.serve.log" || { cleanup; CUR_DB=""; return 1; }
    serve_args=(--serve-pid "$SERVE_PID")
  fi
  log "$name run $rep/$REPEATS: N=$N STARTERS=$STARTERS database $db"
  local rc=0
  (cd "$HERE" && python3 "$HERE/measure.py" "$out" "${serve_args[@]}" -- timeout "$RUN_TIMEOUT" "${cmd[@]}") >"$logf" 2>&1 || rc=$?
  serve_stop
  psql_admin "drop database if exists $db with (force)"; CUR_DB=""
  grep '^RESULT' "$logf" >&2 || { log "$name run $rep failed (exit $rc), see $logf"; tail -5 "$logf" >&2; }
  return 0
}

# --- main ----------------------------------------------------------------------------------------
PG_VERSION=$(psql_admin "show server_version")
python3 - "$RESULTS_DIR/meta.json" <<EOF
import json, os, sys
json.dump({"command": "N=$N STARTERS=$STARTERS REPEATS=$REPEATS CONTENDERS=\"$CONTENDERS\" bench/durable/run.sh",
           "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "n": $N, "starters": $STARTERS, "repeats": $REPEATS,
           "postgres": "$PG_VERSION at ${PG_URL#*@}", "cores": os.cpu_count(),
           "python": "$(python3 --version 2>&1)", "node": "$(node --version)"}, open(sys.argv[1], "w"), indent=1)
EOF
for name in $CONTENDERS; do
  if [ "$SKIP_INSTALL" != 1 ]; then
    log "install $name"
    inst=${name%-eager}; inst=${inst%-queue}
    if ! "install_${inst//-/_}"; then log "skipping $name: install failed"; continue; fi
  fi
  for rep in $(seq 1 "$REPEATS"); do run_one "$name" "$rep" || true; done
done
python3 "$HERE/summarize.py" "$RESULTS_DIR"
log "results in $RESULTS_DIR"
