#!/usr/bin/env bash
# Fuzzes the HTTP API against its own OpenAPI document with schemathesis (PyPI), on SQLite, on
# PostgreSQL and on MariaDB/MySQL: examples, coverage, fuzzing and stateful phases, every check but one — no 5xx, every
# status, content type, header and body as documented, schema-violating requests refused,
# unsupported methods refused, created resources reachable, and (`ignored_auth`) every route
# that declares the bearer scheme refusing requests without a valid token: the server runs with
# `--auth required` and schemathesis sends an admin token.
#
# And that the fuzzer got past authentication everywhere: scripts/api-fuzz-hooks.py records the
# answer to every request, and the run fails when an operation of the document that needs a
# token never answered the admin token with anything but 401/403, or when any request carrying it got 401 or 403.
# The hooks also keep the fuzzer from revoking its own token (`DELETE /v1/tokens/admin`; it
# reads the name in `GET /v1/tokens`), after which every later operation answered only 401: such
# a request revokes a spare token made for it instead.
#
# The check left out is `positive_data_acceptance` (a schema-valid request must be accepted):
# some rules cannot be written in JSON Schema — durations are humantime strings bounded by their
# sum ("1h 30m" ≤ 30 days), `expires_at` must be after `run_at`, a task id must exist — so the
# server rightly refuses requests the document cannot call invalid.
#
#   scripts/api-fuzz.sh             # 90 s per backend, the backends at once
#   FUZZ_BACKENDS="sqlite mysql" scripts/api-fuzz.sh   # some of sqlite, postgres, mysql
#   FUZZ_SECONDS=600 FUZZ_RANDOM=1 scripts/api-fuzz.sh   # longer, and a fresh seed each run
#   FUZZ_EXAMPLES=500 …             # examples per operation in the fuzzing phase [schemathesis: 100]
# CI uses schemathesis's deterministic mode, so a run finds the same cases every time.
# DOCKET_TEST_PG_URL points at PostgreSQL (default postgres://postgres@127.0.0.1:5432/postgres),
# DOCKET_TEST_MYSQL_URL at MySQL/MariaDB (default mysql://root@127.0.0.1:3306/test; the run uses a
# database fuzz_<random> there, created by docket and dropped at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH=${FUZZ_SECONDS:-90}
PG_URL=${DOCKET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
MYSQL_URL=${DOCKET_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}
BACKENDS=${FUZZ_BACKENDS:-sqlite postgres mysql}
say() { echo "[api-fuzz] $*" >&2; }

VENV=$ROOT/target/schemathesis-venv
if [ ! -x "$VENV/bin/schemathesis" ]; then
  say "installing schemathesis into $VENV (PyPI)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'schemathesis==4.32.5'
fi
# test.sh passes the binary `cargo test --workspace` built (DOCKET_BIN): building `-p docket`
# alone resolves features differently and would compile the dependencies a second time.
if [ -n "${DOCKET_BIN:-}" ]; then
  BIN=$DOCKET_BIN
else
  cargo build -q -p docket
  BIN=$ROOT/target/debug/docket
fi
WORK=$(mktemp -d /tmp/docket-fuzz.XXXXXX)
SCHEMA="fuzz_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
# The same URL naming database $SCHEMA (mysql://user@host:port/db?opts -> …/$SCHEMA?opts).
MYSQL_DB_URL=$(python3 -c 'import sys,re; u=sys.argv[1]; print(re.sub(r"^([a-z]+://[^/?]*)(/[^?]*)?", r"\1/"+sys.argv[2], u))' "$MYSQL_URL" "$SCHEMA")
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  psql "$PG_URL" -XAtqc "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1 || true
  python3 - "$MYSQL_URL" "$SCHEMA" >/dev/null 2>&1 <<'PY' || true
import re, subprocess, sys
m = re.match(r"^[a-z]+://(?:([^:@/]*)(?::([^@/]*))?@)?([^:/?]+)(?::(\d+))?", sys.argv[1])
user, pw, host, port = m.group(1) or "root", m.group(2), m.group(3), m.group(4) or "3306"
args = ["mariadb", "--protocol=tcp", "-h", host, "-P", port, "-u", user] + (["-p" + pw] if pw else [])
subprocess.run(args + ["-e", "DROP DATABASE IF EXISTS `%s`" % sys.argv[2]], check=False)
PY
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

if [ -n "${FUZZ_RANDOM:-}" ]; then
  MODE=(--seed "$RANDOM$RANDOM")
else
  MODE=(--generation-deterministic)
fi
if [ -n "${FUZZ_EXAMPLES:-}" ]; then
  MODE+=(--max-examples "$FUZZ_EXAMPLES")
fi

fuzz() { # backend-name database-args...
  local name=$1; shift
  local port; port=$(free_port)
  local token; token="dkt_$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
  # No rate limit: the fuzzer's pace is not what is under test here (tests/auth.rs covers it).
  DOCKET_ADMIN_TOKEN=$token DOCKET_LOG=error "$BIN" serve "$@" --listen "127.0.0.1:$port" \
    --auth required --rate-limit 0 --max-long-polls 0 >"$WORK/$name.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  say "$name: schemathesis for ${SECONDS_EACH}s"
  local rc=0
  # Run from a directory of the backend's own: schemathesis keeps a cache (.schemathesis/) in
  # its working dir, and the backends are fuzzed at once.
  # One worker: with two, hypothesis calls ast.parse from two threads, and CPython 3.11's AST
  # recursion counter is not thread-safe (SystemError "AST constructor recursion depth mismatch",
  # a CI run failed on it) — a fault in the fuzzer, not in docket.
  : >"$WORK/$name.statuses"
  mkdir -p "$WORK/$name.d"
  curl -fsS "http://127.0.0.1:$port/openapi.json" >"$WORK/$name.openapi.json"
  # Long-polls answer after up to 60 s by design (a claim's or a run result's `wait`), past
  # schemathesis's 10 s request timeout: the documented examples of `wait` are 5 s (a run
  # result's example of 30 s, sent for a run that never ended, failed a CI run as a network
  # error). A longer request timeout was tried and let a process call wait out its 30 s
  # process_step_timeout into a 504, which the server-error check fails.
  # The budget is wall time, and the examples and coverage phases go through the operations in
  # order: on a slow machine a pass can end before it reached them all (a CI run reached 29 of 78
  # on MariaDB). Up to three more passes fuzz only the operations not reached yet.
  local pass only=() left
  for pass in 1 2 3 4; do
    ( cd "$WORK/$name.d" && export SCHEMATHESIS_HOOKS="$ROOT/scripts/api-fuzz-hooks.py" \
        DOCKET_FUZZ_TOKEN="$token" DOCKET_FUZZ_TOKEN_NAME=admin DOCKET_FUZZ_URL="http://127.0.0.1:$port" \
        DOCKET_FUZZ_STATUSES="$WORK/$name.statuses" \
      && exec "$VENV/bin/schemathesis" run "http://127.0.0.1:$port/openapi.json" \
      --checks all --exclude-checks positive_data_acceptance \
      --phases examples,coverage,fuzzing,stateful \
      --max-time "$SECONDS_EACH" --workers 1 --warnings off \
      --header "Authorization: Bearer $token" \
      "${MODE[@]}" "${only[@]}" ) >"$WORK/$name.out" 2>&1 || rc=$?
    sed -n '/SUMMARY/,$p' "$WORK/$name.out"
    [ "$rc" = 0 ] || break
    left=$("$VENV/bin/python" "$ROOT/scripts/api-fuzz-hooks.py" unreached "$WORK/$name.statuses" \
      "$WORK/$name.openapi.json")
    [ -n "$left" ] && [ "$pass" != 4 ] || break
    only=()
    while IFS= read -r op; do only+=(--include-name "$op"); done <<<"$left"
    say "$name: pass $((pass + 1)) for the $(wc -l <<<"$left") operations not reached yet"
  done
  local auth=0
  "$VENV/bin/python" "$ROOT/scripts/api-fuzz-hooks.py" check "$WORK/$name.statuses" \
    "$WORK/$name.openapi.json" || auth=$?
  if [ "$rc" != 0 ]; then
    cat "$WORK/$name.out"
    say "$name: schemathesis found failures (exit $rc)"
    exit 1
  fi
  if [ "$auth" != 0 ]; then
    say "$name: operations not reached with the fuzzer's valid token (above)"
    exit 1
  fi
  if grep -qiE 'panicked|request handler panicked' "$WORK/$name.log"; then
    cat "$WORK/$name.log"; say "$name: the server logged a panic"; exit 1
  fi
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=
}

# The backends are fuzzed at once, each with its own server, database and files, 90 s each:
# one after another at 60 s each they took 3.1 minutes and made 1,270–2,147 cases each; at once
# at 60 s, 1.4 minutes and 814–1,085; at once at 90 s, 1.6 minutes and 1,718–1,856 (2026-11-30).
for b in $BACKENDS; do
  case $b in sqlite | postgres | mysql) ;; *) say "unknown backend $b (sqlite, postgres, mysql)"; exit 2 ;; esac
done
PIDS=()
for b in $BACKENDS; do
  (
    SERVER=
    trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null' EXIT
    case $b in
      sqlite) fuzz sqlite --database "sqlite://$WORK/fuzz.db" ;;
      postgres) fuzz postgres --database "$PG_URL" --schema "$SCHEMA" ;;
      mysql) fuzz mysql --database "$MYSQL_DB_URL" ;;
    esac
  ) >"$WORK/$b.run" 2>&1 &
  PIDS+=($!)
done
n=0 failed=()
i=0
for b in $BACKENDS; do
  if wait "${PIDS[$i]}"; then n=$((n + 1)); else failed+=("$b"); fi
  i=$((i + 1))
  cat "$WORK/$b.run"
done
echo "api-fuzz: $n passed, ${#failed[@]} failed${failed[*]:+ (${failed[*]})}"
[ ${#failed[@]} = 0 ]
