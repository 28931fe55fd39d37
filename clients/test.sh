#!/usr/bin/env bash
# Tests of the native clients (Python, TypeScript, Go; Erlang by clients/erlang/test.sh on its own
# servers) against real `docket serve`s: one on a
# SQLite file, one on PostgreSQL (a schema of its own), one on MariaDB/MySQL (a database of its
# own, t_<32 hex digits>, dropped at the end — scripts/test.sh drops one a killed run left), and
# one with tokens required and TLS (SQLite); each client's tests run on the first three.
# Installs what the clients need (a Python venv with httpx and pytest under target/clients-venv,
# the TypeScript package's dev dependencies with npm, Go with apt when missing). Then installs
# each client as its README says, from the committed state (git archive HEAD) into empty
# projects, and runs a call and the README's quickstart with it. Run by scripts/test.sh; alone:
#   clients/test.sh                # every client
#   clients/test.sh python go      # some
# DOCKET_BIN (default target/debug/docket, built when missing), DOCKET_TEST_PG_URL and
# DOCKET_TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306/test: its server is used) apply;
# DOCKET_CLIENTS_INSTALL_FROM (a commit or tree, default HEAD) is what the installs take.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
say() { echo "[clients/test.sh] $*" >&2; }
WHICH=${*:-python typescript go erlang}
export DOCKET_TEST_PG_URL=${DOCKET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
export DOCKET_TEST_MYSQL_URL=${DOCKET_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}
if [ -z "${DOCKET_BIN:-}" ]; then
  cargo build -q -p docket
  DOCKET_BIN=$ROOT/target/debug/docket
fi
export DOCKET_BIN

WORK=$(mktemp -d /tmp/docket-clients.XXXXXX)
PIDS=()
SCHEMA="clients_$(date +%s)_$$"
# The MariaDB server's database: docket serve creates it; named as the Rust tests' are, so
# scripts/test.sh drops it an hour on if this script is killed before its cleanup.
MYSQL_DB="t_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
MYSQL_DB_URL=$(python3 -c 'import re, sys; print(re.sub(r"^([a-z]+://[^/?]*)(/[^?]*)?", r"\1/" + sys.argv[2], sys.argv[1]))' \
  "$DOCKET_TEST_MYSQL_URL" "$MYSQL_DB")
drop_mysql_db() {
  python3 - "$DOCKET_TEST_MYSQL_URL" "$MYSQL_DB" <<'PY'
import re, shutil, subprocess, sys
m = re.match(r"^[a-z]+://(?:([^:@/]*)(?::([^@/]*))?@)?([^:/?]+)(?::(\d+))?", sys.argv[1])
user, pw, host, port = m.group(1) or "root", m.group(2), m.group(3), m.group(4) or "3306"
client = shutil.which("mariadb") or shutil.which("mysql")
args = [client, "--protocol=tcp", "-h", host, "-P", port, "-u", user] + (["-p" + pw] if pw else [])
subprocess.run(args + ["-e", "DROP DATABASE IF EXISTS `%s`" % sys.argv[2]], check=True)
PY
}
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql "$DOCKET_TEST_PG_URL" -XAtqc "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1 || true
  drop_mysql_db >/dev/null 2>&1 || say "could not drop MariaDB database $MYSQL_DB (scripts/test.sh drops it later)"
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
P1=$(free_port); P2=$(free_port); P3=$(free_port); P4=$(free_port)
start sqlite "$P1" --database "sqlite://$WORK/sqlite.db"
start postgres "$P2" --database "$DOCKET_TEST_PG_URL" --schema "$SCHEMA"
start mysql "$P4" --database "$MYSQL_DB_URL"
"$DOCKET_BIN" migrate --database "sqlite://$WORK/tls.db" >/dev/null
TOKEN=$("$DOCKET_BIN" token create --database "sqlite://$WORK/tls.db" --scope admin clients-admin)
start tls "$P3" --database "sqlite://$WORK/tls.db" --auth required \
  --tls-cert "$WORK/srv.pem" --tls-key "$WORK/srv.key"
say "servers: SQLite, PostgreSQL (schema $SCHEMA), MariaDB (database $MYSQL_DB), TLS"
export DOCKET_TEST_SERVERS="sqlite=http://127.0.0.1:$P1,postgres=http://127.0.0.1:$P2,mysql=http://127.0.0.1:$P4"
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
      # dist/ is checked in (so `npm install ./clients/typescript` builds nothing): it must be
      # exactly what src/ compiles to — compiled apart here, so the checkout is not touched.
      (cd "$HERE/typescript" && { [ -d node_modules ] || npm ci --no-audit --no-fund -s; } &&
        npm run -s build -- --outDir "$WORK/ts-dist")
      if ! diff -r "$HERE/typescript/dist" "$WORK/ts-dist" >/dev/null; then
        say "clients/typescript/dist is not what src/ compiles to: run npm run build there and commit dist/"
        diff -rq "$HERE/typescript/dist" "$WORK/ts-dist" >&2 || true
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
    erlang)
      # progressor's API (issue 42): its own servers on PostgreSQL, plain and with TLS + token.
      say "erlang: clients/erlang/test.sh"
      "$HERE/erlang/test.sh" ;;
    *) say "unknown client $lang"; exit 2 ;;
  esac
done
# Each README's quickstart is the example file beside it.
say "quickstarts: README blocks = examples/"
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

# Each client installed as its README and docs/src/clients.md say, from the committed state:
# `git archive HEAD` into a directory of its own (no node_modules, venv or Go cache comes along),
# into an empty project (npm), a new venv (pip) or an empty module with fresh Go caches and no
# module proxy (Go). Then one real call each — a task enqueued and read back, on the SQLite server
# and on the TLS one with its CA and token — and the README's quickstart as written, on SQLite.
CLONE=$WORK/clone FROM=${DOCKET_CLIENTS_INSTALL_FROM:-HEAD}
mkdir -p "$CLONE" && git -C "$ROOT" archive "$FROM" | tar -x -C "$CLONE"
say "installs: from $FROM $(git -C "$ROOT" rev-parse --short "$FROM") (changes not committed are not in it)"
export DOCKET_SERVER=${DOCKET_TEST_SERVERS#sqlite=}; DOCKET_SERVER=${DOCKET_SERVER%%,*}
install_line() { # file prefix: its first line starting with prefix (comment dropped), also in clients.md
  local line
  line=$(grep -m1 "^$2" "$1" | sed 's/[[:space:]]*#.*$//' || true)
  if [ -z "$line" ]; then say "$1: no install line starting '$2'"; return 1; fi
  if ! grep -qF "\`$line\`" "$ROOT/docs/src/clients.md"; then
    say "docs/src/clients.md does not give \`$line\` as $1 does"; return 1
  fi
  printf '%s' "$line"
}
quietly() { # log command...: runs it, shows its output only when it fails
  local log=$1; shift
  if ! "$@" >"$log" 2>&1; then cat "$log" >&2; return 1; fi
}
expect() { # what, output, wanted
  if [ "$2" != "$3" ]; then say "$1 printed '$2', not '$3'"; exit 1; fi
}
for lang in $WHICH; do
  case $lang in
    python)
      line=$(install_line "$HERE/python/README.md" "pip install ")
      say "python: '$line' in a new venv, from the repository's root"
      python3 -m venv "$WORK/venv"
      (cd "$CLONE" && . "$WORK/venv/bin/activate" && quietly "$WORK/pip.log" eval "$line")
      expect "python, installed," "$(cd "$WORK" && VIRTUAL_ENV_DIR=$WORK/venv "$WORK/venv/bin/python" - <<'PY'
import os
import docket_client
from docket_client import Client
assert docket_client.__file__.startswith(os.environ["VIRTUAL_ENV_DIR"]), docket_client.__file__
for c in (Client(), Client(server=os.environ["DOCKET_TEST_TLS_URL"], token=os.environ["DOCKET_TEST_TOKEN"],
                          ca_file=os.environ["DOCKET_TEST_CA"])):
    t = c.enqueue("installed", {"from": "pip"}, queue="install-check")
    got = c.get_task(t["id"])
    assert (got["queue"], got["payload"]) == ("install-check", {"from": "pip"}), got
print("ok")
PY
)" ok
      expect "python quickstart" "$(cd "$CLONE" && timeout 120 "$WORK/venv/bin/python" examples/python/quickstart.py)" "hello, Ada" ;;
    typescript)
      line=$(install_line "$HERE/typescript/README.md" "npm install ")
      say "typescript: '$line' into an empty project (the path: the copy's)"
      mkdir -p "$WORK/ts-project"
      (cd "$WORK/ts-project" && npm init -y >/dev/null &&
        quietly "$WORK/npm.log" eval "${line/.\//$CLONE/} --no-audit --no-fund")
      cat > "$WORK/ts-project/check.mjs" <<'JS'
import { Client } from "@docket/client";
const env = process.env;
for (const c of [new Client(), new Client({ server: env.DOCKET_TEST_TLS_URL, token: env.DOCKET_TEST_TOKEN, caFile: env.DOCKET_TEST_CA })]) {
  const t = await c.enqueue("installed", { from: "npm" }, { queue: "install-check" });
  const got = await c.getTask(t.id);
  if (got.queue !== "install-check" || got.payload.from !== "npm") throw new Error(JSON.stringify(got));
}
console.log("ok");
JS
      # CommonJS code (node-daemons' workers are) requires the package (Node ≥ 20.19).
      cat > "$WORK/ts-project/check.cjs" <<'JS'
const { Client, TaskWorker } = require("@docket/client");
if (typeof TaskWorker !== "function") throw new Error("no TaskWorker");
new Client().enqueue("installed", { from: "require" }, { queue: "install-check" })
  .then((t) => new Client().getTask(t.id))
  .then((got) => console.log(got.payload.from === "require" ? "ok" : JSON.stringify(got)));
JS
      expect "typescript, installed (import)," "$(cd "$WORK/ts-project" && node check.mjs)" ok
      expect "typescript, installed (require)," "$(cd "$WORK/ts-project" && node check.cjs)" ok
      cp "$CLONE/examples/typescript/quickstart.mjs" "$WORK/ts-project/"
      expect "typescript quickstart" "$(cd "$WORK/ts-project" && timeout 120 node quickstart.mjs)" "hello, Ada" ;;
    go)
      line=$(install_line "$HERE/go/README.md" "cd clients/go")
      # The go.mod lines of a program elsewhere: the README's block after "A program outside".
      block=$(python3 -c 'import re, sys; t = open(sys.argv[1]).read(); t = t[t.index("A program outside"):]
print(re.search(r"```sh\n(.*?)```", t, re.S).group(1), end="")' "$HERE/go/README.md")
      say "go: '$line' from the repository's root; an empty module with the README's go.mod lines"
      mkdir -p "$WORK/go-project"
      cat > "$WORK/go-project/main.go" <<'GO'
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	docket "github.com/docket/docket/clients/go"
)

func main() {
	ctx := context.Background()
	tls := docket.Options{Server: os.Getenv("DOCKET_TEST_TLS_URL"), Token: os.Getenv("DOCKET_TEST_TOKEN"), CAFile: os.Getenv("DOCKET_TEST_CA")}
	for _, o := range []docket.Options{{}, tls} {
		c, err := docket.NewClient(o)
		check(err)
		t, err := c.Enqueue(ctx, docket.NewTask{Kind: "installed", Payload: map[string]string{"from": "go"}, Queue: "install-check"})
		check(err)
		got, err := c.GetTask(ctx, t.ID)
		check(err)
		var p map[string]string
		check(json.Unmarshal(got.Payload, &p))
		if got.Queue != "install-check" || p["from"] != "go" {
			check(fmt.Errorf("read back %s %v", got.Queue, p))
		}
	}
	fmt.Println("ok")
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
GO
      (
        export GOPATH=$WORK/gopath GOCACHE=$WORK/gocache GOPROXY=off GOFLAGS=
        (cd "$CLONE" && quietly "$WORK/go-build.log" eval "$line")
        (cd "$WORK/go-project" && quietly "$WORK/go-mod.log" eval "${block//\/path\/to\/docket/$CLONE}")
        expect "go, installed," "$(cd "$WORK/go-project" && go run .)" ok
        expect "go quickstart" "$(cd "$CLONE/examples/go" && timeout 120 go run .)" '"hello, Ada"'
      ) ;;
  esac
done
say "ok"
