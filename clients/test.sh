#!/usr/bin/env bash
# Tests of the native clients (Python, TypeScript, Go) against real `docket serve`s: one on a
# SQLite file, one on PostgreSQL (a schema of its own), and one with tokens required and TLS
# (SQLite). Installs what the clients need (a Python venv with httpx and pytest under
# target/clients-venv, the TypeScript package's dev dependencies with npm, Go with apt when
# missing). Run by scripts/test.sh; alone:
#   clients/test.sh                # every client
#   clients/test.sh python go      # some
# DOCKET_BIN (default target/debug/docket, built when missing) and DOCKET_TEST_PG_URL apply.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
say() { echo "[clients/test.sh] $*" >&2; }
WHICH=${*:-python typescript go}
export DOCKET_TEST_PG_URL=${DOCKET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
if [ -z "${DOCKET_BIN:-}" ]; then
  cargo build -q -p docket
  DOCKET_BIN=$ROOT/target/debug/docket
fi
export DOCKET_BIN

WORK=$(mktemp -d /tmp/docket-clients.XXXXXX)
PIDS=()
SCHEMA="clients_$(date +%s)_$$"
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql "$DOCKET_TEST_PG_URL" -XAtqc "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A private CA and a certificate for 127.0.0.1/localhost signed by it.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=docket test CA" \
  -keyout "$WORK/ca.key" -out "$WORK/ca.pem" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$WORK/srv.key" \
  -out "$WORK/srv.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' > "$WORK/ext.cnf"
openssl x509 -req -in "$WORK/srv.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
  -CAcreateserial -days 2 -extfile "$WORK/ext.cnf" -out "$WORK/srv.pem" >/dev/null 2>&1

# Short rescue and poll intervals: a killed worker's tasks come back within a second or two.
COMMON=(--rescue-interval 200ms --poll-interval 100ms --grace 5s)
start() { # name port args...
  local name=$1 port=$2; shift 2
  "$DOCKET_BIN" serve --listen "127.0.0.1:$port" --node "clients-$name" "${COMMON[@]}" "$@" \
    >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 150); do
    if curl -fsk "$([ "$name" = tls ] && echo https || echo http)://127.0.0.1:$port/healthz" >/dev/null 2>&1; then return; fi
    sleep 0.2
  done
  say "docket serve ($name) did not come up:"; cat "$WORK/$name.log" >&2; exit 1
}
P1=$(free_port); P2=$(free_port); P3=$(free_port)
start sqlite "$P1" --database "sqlite://$WORK/sqlite.db"
start postgres "$P2" --database "$DOCKET_TEST_PG_URL" --schema "$SCHEMA"
"$DOCKET_BIN" migrate --database "sqlite://$WORK/tls.db" >/dev/null
TOKEN=$("$DOCKET_BIN" token create --database "sqlite://$WORK/tls.db" --scope admin clients-admin)
start tls "$P3" --database "sqlite://$WORK/tls.db" --auth required \
  --tls-cert "$WORK/srv.pem" --tls-key "$WORK/srv.key"
export DOCKET_TEST_SERVERS="sqlite=http://127.0.0.1:$P1,postgres=http://127.0.0.1:$P2"
export DOCKET_TEST_TLS_URL="https://127.0.0.1:$P3" DOCKET_TEST_CA="$WORK/ca.pem" DOCKET_TEST_TOKEN="$TOKEN"
unset DOCKET_TOKEN DOCKET_SERVER

# The generated types match the document.
"$HERE/generate.sh" --check

for lang in $WHICH; do
  case $lang in
    python)
      VENV=$ROOT/target/clients-venv
      [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
      "$VENV/bin/pip" install -q -e "$HERE/python[test]"
      say "python: pytest"
      (cd "$HERE/python" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider) ;;
    typescript)
      # dist/ is checked in (so `npm install ./clients/typescript` needs no build): it must be
      # what the sources compile to.
      (cd "$HERE/typescript" && { [ -d node_modules ] || npm ci --no-audit --no-fund -s; } && npm run -s build)
      if [ -n "$(git status --porcelain -- "$HERE/typescript/dist")" ]; then
        say "clients/typescript/dist is not what src/ compiles to: run npm run build there and commit dist/"
        git status --short -- "$HERE/typescript/dist" >&2
        exit 1
      fi
      say "typescript: node --test"
      (cd "$HERE/typescript" && npm test -s) ;;
    go)
      if ! command -v go >/dev/null; then
        [ "$(id -u)" = 0 ] || { say "go is missing and this is not root: install golang-go"; exit 1; }
        say "installing Go (apt golang-go)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
      fi
      say "go: go vet, go test"
      (cd "$HERE/go" && GOFLAGS=-mod=mod GOPROXY=off go vet ./... && GOPROXY=off go test -count=1 ./...) ;;
    *) say "unknown client $lang"; exit 2 ;;
  esac
done
# Each README's quickstart is the example file beside it, and runs as written.
say "quickstarts: README blocks = examples/, then run against the SQLite server"
python3 - "$ROOT" <<'PY'
import re, sys
root = sys.argv[1]
for readme, lang, example in [("python", "python", "examples/python/quickstart.py"),
                              ("typescript", "js", "examples/typescript/quickstart.mjs"),
                              ("go", "go", "examples/go/main.go")]:
    text = open(f"{root}/clients/{readme}/README.md").read()
    quick = text[text.index("## Quickstart"):]
    block = re.search(r"```" + lang + r"\n(.*?)```", quick, re.S).group(1)
    if block != open(f"{root}/{example}").read():
        sys.exit(f"clients/{readme}/README.md: the quickstart differs from {example}")
PY
export DOCKET_SERVER=${DOCKET_TEST_SERVERS#sqlite=}; DOCKET_SERVER=${DOCKET_SERVER%%,*}
expect() { # what, output
  if [ "$2" != "$3" ]; then say "$1 quickstart printed '$2', not '$3'"; exit 1; fi
}
for lang in $WHICH; do
  case $lang in
    python) expect python "$("$ROOT/target/clients-venv/bin/python" "$ROOT/examples/python/quickstart.py")" "hello, Ada" ;;
    typescript)
      mkdir -p "$WORK/ts-quickstart" && cp "$ROOT/examples/typescript/quickstart.mjs" "$WORK/ts-quickstart/"
      (cd "$WORK/ts-quickstart" && npm init -y >/dev/null && npm install --no-audit --no-fund -s "$HERE/typescript")
      expect typescript "$(cd "$WORK/ts-quickstart" && node quickstart.mjs)" "hello, Ada" ;;
    go) expect go "$(cd "$ROOT/examples/go" && GOPROXY=off GOFLAGS=-mod=mod go run .)" '"hello, Ada"' ;;
  esac
done
say "ok"
