#!/usr/bin/env bash
# Tests of the Erlang client (docket_progressor) against real `docket serve`s on PostgreSQL:
# one plain (http, no token), and one more node on the same schema with tokens required and TLS
# (a throwaway CA made here). Compiles src/ and test/ with erlc into a temporary ebin and runs
# docket_progressor_tests, which prints "N passed, N failed". Installs erlang-jiffy with apt
# when it is missing. The schema (erl_<time>_<pid>) is dropped at the end.
#   DOCKET_BIN          the docket binary [target/debug/docket, built when missing]
#   DOCKET_TEST_PG_URL  PostgreSQL [postgres://postgres@127.0.0.1:5432/postgres]
#   DOCKET_PROGRESSOR_SRC  a checkout (or a bare git directory) of valitydev/progressor: its own
#                       src/prg_echo_processor.erl is compiled unchanged and serves the echo
#                       namespace in place of the test's twin (test/docket_progressor_echo_processor.erl,
#                       written from its behaviour: progressor's code is not copied here)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
say() { echo "[clients/erlang/test.sh] $*" >&2; }
PG=${DOCKET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
if [ -z "${DOCKET_BIN:-}" ]; then
  DOCKET_BIN=$ROOT/target/debug/docket
  [ -x "$DOCKET_BIN" ] || (cd "$ROOT" && cargo build -q -p docket)
fi

if ! erl -noshell -eval 'halt(case code:which(jiffy) of non_existing -> 1; _ -> 0 end)'; then
  [ "$(id -u)" = 0 ] || { say "jiffy is missing and this is not root: apt-get install erlang-jiffy"; exit 1; }
  say "installing erlang-jiffy (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq erlang-jiffy >/dev/null
fi

WORK=$(mktemp -d /tmp/docket-erlang.XXXXXX)
SCHEMA="erl_$(date +%s)_$$"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql "$PG" -XAtqc "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1 ||
    say "could not drop schema $SCHEMA"
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/ebin"
erlc -Wall -Werror -o "$WORK/ebin" "$HERE"/src/*.erl "$HERE"/test/*.erl
cp "$HERE/src/docket_progressor.app.src" "$WORK/ebin/docket_progressor.app"
SYS_CONFIG=$HERE/test/progressor_sys.config
if [ -n "${DOCKET_PROGRESSOR_SRC:-}" ]; then
  if [ -f "$DOCKET_PROGRESSOR_SRC/src/prg_echo_processor.erl" ]; then
    cp "$DOCKET_PROGRESSOR_SRC/src/prg_echo_processor.erl" "$WORK/prg_echo_processor.erl"
  else
    git --git-dir="$DOCKET_PROGRESSOR_SRC" show HEAD:src/prg_echo_processor.erl >"$WORK/prg_echo_processor.erl"
  fi
  erlc -o "$WORK/ebin" "$WORK/prg_echo_processor.erl"
  sed 's/docket_progressor_echo_processor/prg_echo_processor/' "$SYS_CONFIG" >"$WORK/sys.config"
  grep -q 'client => prg_echo_processor' "$WORK/sys.config"
  SYS_CONFIG=$WORK/sys.config
  say "echo namespace served by progressor's own prg_echo_processor ($(sha256sum "$WORK/prg_echo_processor.erl" | cut -c1-16))"
fi

# A CA and a certificate for 127.0.0.1/localhost signed by it.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=docket erlang test CA" \
  -keyout "$WORK/ca.key" -out "$WORK/ca.pem" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$WORK/srv.key" \
  -out "$WORK/srv.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' > "$WORK/ext.cnf"
openssl x509 -req -in "$WORK/srv.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
  -CAcreateserial -days 2 -extfile "$WORK/ext.cnf" -out "$WORK/srv.pem" >/dev/null 2>&1

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() { # name url args...
  local name=$1 url=$2; shift 2
  "$DOCKET_BIN" serve --node "erl-$name" --poll-interval 100ms --grace 5s \
    --database "$PG" --schema "$SCHEMA" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 150); do
    if curl -fsk "$url/healthz" >/dev/null 2>&1; then return; fi
    sleep 0.2
  done
  say "docket serve ($name) did not come up:"; cat "$WORK/$name.log" >&2; exit 1
}
P1=$(free_port); P2=$(free_port)
start plain "http://127.0.0.1:$P1" --listen "127.0.0.1:$P1"
TOKEN=$("$DOCKET_BIN" token create --database "$PG" --schema "$SCHEMA" --scope admin --scope process erl-test 2>/dev/null)
start tls "https://127.0.0.1:$P2" --listen "127.0.0.1:$P2" --auth required \
  --tls-cert "$WORK/srv.pem" --tls-key "$WORK/srv.key"
say "docket serve on PostgreSQL schema $SCHEMA: http://127.0.0.1:$P1 and https://127.0.0.1:$P2 (token)"

unset DOCKET_TOKEN DOCKET_CA_FILE
export DOCKET_SERVER="http://127.0.0.1:$P1"
export DOCKET_TEST_TLS_URL="https://127.0.0.1:$P2" DOCKET_TEST_TOKEN="$TOKEN" DOCKET_TEST_CA="$WORK/ca.pem"
# The processor's httpd needs a directory of its own to stand in (it serves no files).
cd "$WORK"
# test/progressor_sys.config: progressor's own sys.config entry, for start_namespaces/0.
if ! timeout 600 erl -noshell -pa "$WORK/ebin" -config "${SYS_CONFIG%.config}" \
    -eval 'docket_progressor_tests:main()'; then
  say "failed; docket's logs:"; tail -n 40 "$WORK"/*.log >&2
  exit 1
fi
