#!/usr/bin/env bash
# Runs docket's whole test suite against a real PostgreSQL and real SQLite files, and builds
# and link-checks the book (scripts/docs.sh).
# Installs and starts PostgreSQL, MariaDB, a three-node MariaDB Galera cluster (scripts/galera.sh)
# and RabbitMQ when missing or down, installs nats-server and tansu, a Kafka-compatible broker
# (the sink tests start their own), Erlang/OTP, and Chromium and
# chromedriver for the dashboard test (Debian/Ubuntu, as root); clients/test.sh installs what
# the native clients need (a Python venv, npm packages, Go with apt).
#   scripts/test.sh                 # everything, then the short chaos run (scripts/chaos.sh)
#   scripts/test.sh -p docket-store # extra arguments go to `cargo test`
# DOCKET_TEST_PG_URL overrides the database (default postgres://postgres@127.0.0.1:5432/postgres).
# The MySQL backend's tests run on MariaDB (installed with apt and started when missing or down);
# DOCKET_TEST_MYSQL_URL points them at another server (default mysql://root@127.0.0.1:3306/test;
# each test creates its own database t_<uuid> there, and this script drops older runs' ones).
set -euo pipefail
cd "$(dirname "$0")/.."
export DOCKET_TEST_PG_URL=${DOCKET_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
export DOCKET_TEST_MYSQL_URL=${DOCKET_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}

# Each line carries the minutes since the start and how busy the machine's cores were since the
# line before (all processes, the databases' too): CI's budget is an hour, and its log's tail is
# what shows where the time went and which steps leave cores idle.
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
CPU_LAST=$(cpu_ticks)
say() {
  local now busy
  now=$(cpu_ticks)
  busy=$(awk -v a="$CPU_LAST" -v b="$now" 'BEGIN { split(a, x, " "); split(b, y, " "); d = y[2] - x[2]; printf "%d", (d > 0 ? 100 * (y[1] - x[1]) / d : 0) }')
  CPU_LAST=$now
  printf '[test.sh %dm%02ds, cores %d%% busy since the last line] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$busy" "$*" >&2
}

pg_ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
pg_login() { psql "$DOCKET_TEST_PG_URL" -Atqc 'select 1' >/dev/null 2>&1; }

ensure_postgres() {
  if command -v pg_isready >/dev/null && pg_ready && pg_login; then return; fi
  if [ "$(id -u)" != 0 ]; then
    say "PostgreSQL is not reachable at $DOCKET_TEST_PG_URL and this is not root: start it, or set DOCKET_TEST_PG_URL"
    exit 1
  fi
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    say "installing PostgreSQL (apt)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-client >/dev/null
  fi
  local ver
  ver=$(ls /usr/lib/postgresql | sort -V | tail -1)
  if [ ! -d "/etc/postgresql/$ver/main" ]; then
    say "creating cluster $ver/main"
    pg_createcluster "$ver" main >/dev/null
  fi
  # Tests log in as postgres over 127.0.0.1 without a password: trust local TCP connections.
  local hba="/etc/postgresql/$ver/main/pg_hba.conf"
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  if ! pg_ready; then
    say "starting PostgreSQL $ver"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
  else
    pg_ctlcluster --skip-systemctl-redirect "$ver" main reload || true
  fi
  for _ in $(seq 1 60); do
    if pg_ready && pg_login; then return; fi
    sleep 1
  done
  say "PostgreSQL did not come up"
  exit 1
}

# The SQL TLS test connects with sslmode=require/verify-full to this PostgreSQL; Debian's
# clusters serve the ssl-cert "snakeoil" certificate (CN localhost). Turn it on when it is off.
ensure_postgres_tls() {
  [ "$(psql "$DOCKET_TEST_PG_URL" -XAtqc 'show ssl' 2>/dev/null)" = on ] && return
  if [ "$(id -u)" != 0 ]; then
    say "PostgreSQL at $DOCKET_TEST_PG_URL has ssl off and this is not root: the SQL TLS test will fail"
    return
  fi
  if [ ! -f /etc/ssl/private/ssl-cert-snakeoil.key ]; then
    say "installing ssl-cert (apt) for a snakeoil certificate"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ssl-cert >/dev/null
    make-ssl-cert generate-default-snakeoil --force-overwrite
  fi
  usermod -a -G ssl-cert postgres 2>/dev/null || true
  say "turning on TLS in PostgreSQL (snakeoil certificate)"
  psql "$DOCKET_TEST_PG_URL" -XAtq \
    -c "ALTER SYSTEM SET ssl_cert_file = '/etc/ssl/certs/ssl-cert-snakeoil.pem'" \
    -c "ALTER SYSTEM SET ssl_key_file = '/etc/ssl/private/ssl-cert-snakeoil.key'" \
    -c "ALTER SYSTEM SET ssl = on" -c "SELECT pg_reload_conf()" >/dev/null
}

# MariaDB for the MySQL backend's tests. The default URL logs in as root without a password
# over 127.0.0.1, as Debian's mariadb-server allows once root uses mysql_native_password with an
# empty one; a URL given in DOCKET_TEST_MYSQL_URL is used as it is.
mysql_args() {
  # mysql://user[:pass]@host[:port]/db -> client arguments (the test database is not needed).
  local rest=${DOCKET_TEST_MYSQL_URL#*://} cred host user pass port
  rest=${rest%%\?*}
  cred=${rest%%@*}; host=${rest#*@}; host=${host%%/*}
  user=${cred%%:*}; pass=""; [ "$cred" != "$user" ] && pass=${cred#*:}
  port=3306; case $host in *:*) port=${host##*:}; host=${host%%:*};; esac
  echo "-h $host -P $port -u $user ${pass:+-p$pass}"
}
my() { mariadb $(mysql_args) --protocol=tcp -N -B "$@"; }
mysql_ready() { command -v mariadb >/dev/null && my -e 'select 1' >/dev/null 2>&1; }

ensure_mariadb() {
  if mysql_ready; then return; fi
  if [ "$(id -u)" != 0 ]; then
    say "MariaDB is not reachable at $DOCKET_TEST_MYSQL_URL and this is not root: start it, or set DOCKET_TEST_MYSQL_URL"
    exit 1
  fi
  if [ ! -x /usr/sbin/mariadbd ]; then
    say "installing MariaDB (apt)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-client >/dev/null
  fi
  if ! mariadb-admin --protocol=socket ping >/dev/null 2>&1; then
    say "starting MariaDB"
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
    for _ in $(seq 1 60); do
      mariadb-admin --protocol=socket ping >/dev/null 2>&1 && break
      sleep 1
    done
  fi
  # Root over TCP without a password (Debian's root logs in by socket only), and the default
  # database the URL names.
  mariadb --protocol=socket -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;
    CREATE DATABASE IF NOT EXISTS test" >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do
    if mysql_ready; then return; fi
    sleep 1
  done
  say "MariaDB did not come up at $DOCKET_TEST_MYSQL_URL"
  exit 1
}

# The dashboard test drives Debian's Chromium through chromedriver.
ensure_chromium() {
  if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then return; fi
  if [ "$(id -u)" != 0 ]; then
    say "chromium and chromedriver are missing and this is not root: install chromium chromium-driver"
    exit 1
  fi
  say "installing chromium and chromium-driver (apt)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-dejavu-core >/dev/null
}

# The event sinks' tests (crates/docket-sinks) start private nats-server processes (so they can
# restart one) and use the machine's RabbitMQ at 127.0.0.1:5672 (guest/guest), stopping and
# starting its app once. Both are Debian packages (nats-server, rabbitmq-server).
rabbit_ready() { rabbitmqctl -q await_startup --timeout 2 >/dev/null 2>&1 && (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }

ensure_brokers() {
  local need=()
  command -v nats-server >/dev/null || need+=(nats-server)
  command -v rabbitmq-server >/dev/null || need+=(rabbitmq-server)
  if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
      say "missing ${need[*]} and this is not root: install them (apt)"
      exit 1
    fi
    say "installing ${need[*]} (apt)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  if rabbit_ready; then return; fi
  if [ "$(id -u)" != 0 ]; then
    say "RabbitMQ is not up at 127.0.0.1:5672 and this is not root: start it"
    exit 1
  fi
  say "starting RabbitMQ"
  # A node whose app was stopped (the restart test) only needs start_app.
  rabbitmqctl -q start_app >/dev/null 2>&1 || rabbitmq-server -detached
  for _ in $(seq 1 90); do
    if rabbit_ready; then return; fi
    sleep 1
  done
  say "RabbitMQ did not come up at 127.0.0.1:5672"
  exit 1
}

# Erlang/OTP: the Kafka sink's partitioner is checked against a real erlang:phash2.
ensure_erlang() {
  command -v erl >/dev/null && return
  if [ "$(id -u)" != 0 ]; then
    say "erl is missing and this is not root: install erlang-nox (apt)"
    exit 1
  fi
  say "installing Erlang/OTP (apt erlang-nox)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq erlang-nox >/dev/null
}

# The Kafka sink's tests run a private tansu (crates.io: an Apache Kafka-compatible broker, its
# SQLite storage so a restarted broker keeps what it took). Installed once per machine, outside
# the checkout (a build takes minutes), under ~/.cache/docket/tansu-<version> (DOCKET_TOOLS_DIR
# moves it); built in the background while the book and the tests build, and waited for
# before the tests run. Built unoptimised and without debug information (`--debug`,
# CARGO_PROFILE_DEV_DEBUG=false): the tests send it a few hundred messages, and on a fresh
# machine its optimised build was CI's longest step.
TANSU_VERSION=0.6.0
TANSU_ROOT=${DOCKET_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/docket}/tansu-$TANSU_VERSION
export DOCKET_TANSU=$TANSU_ROOT/bin/tansu
TANSU_PID=
start_tansu_install() {
  if [ -x "$DOCKET_TANSU" ] && [ -f "$TANSU_ROOT/.installed" ]; then return; fi
  say "installing tansu $TANSU_VERSION into $TANSU_ROOT (cargo install --debug --features libsql, in the background)"
  mkdir -p "$TANSU_ROOT"
  ( CARGO_PROFILE_DEV_DEBUG=false cargo install tansu --locked --debug --version "$TANSU_VERSION" \
      --features libsql --root "$TANSU_ROOT" --quiet >"$TANSU_ROOT/install.log" 2>&1 &&
    touch "$TANSU_ROOT/.installed" ) &
  TANSU_PID=$!
}
wait_tansu_install() {
  [ -n "$TANSU_PID" ] || return 0
  if ! wait "$TANSU_PID"; then
    cat "$TANSU_ROOT/install.log" >&2
    say "installing tansu failed (above)"
    exit 1
  fi
  TANSU_PID=
}

# The Kafka sink's progressor encoding (mg_proto) is read back with Apache Thrift's own Python
# library (PyPI thrift), in a venv under target/.
ensure_thrift_python() {
  local venv=$PWD/target/py-thrift
  export DOCKET_TEST_THRIFT_PYTHON=$venv/bin/python
  "$DOCKET_TEST_THRIFT_PYTHON" -c 'import thrift' 2>/dev/null && return
  say "installing thrift 0.22.0 (PyPI) into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'thrift==0.22.0'
}

ensure_postgres
ensure_postgres_tls
ensure_erlang
ensure_thrift_python
ensure_mariadb
ensure_chromium
ensure_brokers
say "PostgreSQL ready at $DOCKET_TEST_PG_URL, MariaDB at $DOCKET_TEST_MYSQL_URL, RabbitMQ at 127.0.0.1:5672"
# MySQL test databases are named t_<uuid> (and cli_, fuzz_, docket_bench_): those older runs
# left are dropped here — only when their tables are over an hour old, so a run going on beside
# this one keeps its databases.
my -e "select concat('drop database \`', table_schema, '\`;') from information_schema.tables
  where table_schema regexp '^(t|cli|fuzz|docket_bench)_[0-9a-f]{32}$'
  group by table_schema having max(create_time) < now() - interval 1 hour" | my >/dev/null 2>&1 || true
# Test schemas are named t_*/cli_*; drop the ones older runs left behind.
psql "$DOCKET_TEST_PG_URL" -Atqc "select 'drop schema \"' || nspname || '\" cascade;' from pg_namespace
  where nspname ~ '^(t|cli|cli_pgt|pgt|docket_bench|bench_pgt|fuzz)_[0-9a-f]+$'" | psql "$DOCKET_TEST_PG_URL" -q >/dev/null 2>&1 || true
start_tansu_install
say "architecture: scripts/check-architecture.py (SQL in .sql files, edges off the store, no loops of files)"
# Its own tests first (fixture trees with each violation and a clean one), then the check.
python3 scripts/test_check_architecture.py
python3 scripts/check-architecture.py
# The book (docs/): built, its API reference rendered and every link checked; the whole suite
# only (extra arguments run a part of `cargo test`).
# It runs in the background while the tests build (its installs wait mostly on the registries).
DOCS_PID=
if [ $# -eq 0 ]; then
  say "docs: scripts/docs.sh (mdbook, the API reference, links), in the background"
  scripts/docs.sh &
  DOCS_PID=$!
fi
# Built before tansu finishes: the builds share the cores.
cargo test --workspace --no-run "$@"
if [ -n "$DOCS_PID" ] && ! wait "$DOCS_PID"; then
  say "docs: scripts/docs.sh failed (above)"
  exit 1
fi
wait_tansu_install
# One binary after another: the test binaries are CPU-bound here. Running the sinks' and the
# CLI's binaries beside the rest was tried (2026-11-30): the cores were 98% busy,
# every binary ran 1.5–2.7× slower (bulk 41 → 86 s, sinks 146 → 254 s, cli 117 → 227 s), and a
# test whose claimers must overlap (engine `limits_hold_across_nodes`) failed.
say "cargo test --workspace $*"
cargo test --workspace "$@"
# MariaDB Galera (issue 38): the store's conformance suite and the engine's tests of the MySQL
# backend again, on a three-node cluster (scripts/galera.sh starts it), each second node writing
# through another Galera node than the first (DOCKET_TEST_MYSQL_URL_2).
if [ $# -eq 0 ] && [ "${DOCKET_SKIP_GALERA:-}" != 1 ]; then
  say "Galera: scripts/galera.sh start, then the MySQL backend's store and engine tests across its nodes"
  scripts/galera.sh start
  mariadb -h 127.0.0.1 -P 3311 -u root -N -B -e "select concat('drop database \`', schema_name, '\`;')
    from information_schema.schemata where schema_name regexp '^t_[0-9a-f]{32}$'" \
    | mariadb -h 127.0.0.1 -P 3311 -u root >/dev/null 2>&1 || true
  # The targets are picked out of the whole workspace (`--workspace --test …`), not with `-p`:
  # another package selection unifies features differently and rebuilds most crates (4 minutes
  # in CI). Every library's unit tests filtered by `mysql` run too (a few seconds).
  targets=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
want = {"docket-engine": None, "docket-sinks": None, "docket-store": {"conformance", "migrate_together", "tag_side_table"}}
for p in json.load(sys.stdin)["packages"]:
    for t in p["targets"]:
        if p["name"] in want and "test" in t["kind"] and (want[p["name"]] is None or t["name"] in want[p["name"]]):
            print("--test", t["name"])')
  # shellcheck disable=SC2086 # one word per argument
  DOCKET_TEST_MYSQL_URL=mysql://root@127.0.0.1:3311/test DOCKET_TEST_MYSQL_URL_2=mysql://root@127.0.0.1:3312/test \
    cargo test --workspace --lib $targets mysql
fi
# Databases of the pg_task idle test that a failed run left behind.
psql "$DOCKET_TEST_PG_URL" -Atqc "select 'drop database \"' || datname || '\" with (force);' from pg_database
  where datname ~ '^pgt_idle_[0-9a-f]+$'" | psql "$DOCKET_TEST_PG_URL" -q >/dev/null 2>&1 || true
# The whole suite (no arguments) ends with the native clients' tests, the API fuzzer (schemathesis against openapi.json,
# 90 s per backend, at once) and the short chaos run (about a minute): 2 nodes, workers, kill -9s, a node
# restart and PostgreSQL crashes on a private cluster.
if [ $# -eq 0 ]; then
  # Benchmark smoke (a few seconds): fails only on a 3x drop against the checked-in baseline of
  # this debug build on SQLite (noise here is about 20%); `docket bench --save` rewrites it.
  say "bench smoke: docket bench --compare bench/baseline-smoke.json"
  target/debug/docket bench -n 3000 -c 4 --latency-secs 0 --compare bench/baseline-smoke.json
  # The native clients (Python, TypeScript, Go) against real servers on SQLite, PostgreSQL and MariaDB.
  say "clients: clients/test.sh (Python, TypeScript, Go)"
  DOCKET_BIN=$PWD/target/debug/docket clients/test.sh
  say "api fuzz: scripts/api-fuzz.sh"
  DOCKET_BIN=$PWD/target/debug/docket scripts/api-fuzz.sh
  # Past one database machine (issue 38): the same faults with the database a Galera cluster
  # (a node killed, a node cut off) and a PostgreSQL primary with a synchronous standby (failed
  # over), the docket nodes on several hosts each. The three runs share nothing (a private
  # PostgreSQL, the Galera cluster, the standby pair; their own ports) and mostly wait — tasks
  # sleep 0.5–0.9 s, faults are timed — so they run at once: about a minute each, not three.
  say "chaos: scripts/chaos.sh --short on PostgreSQL, on Galera and on a standby, at once"
  chaos_logs=$(mktemp -d /tmp/docket-chaos-logs.XXXXXX)
  chaos_pids=()
  for mode in pg galera standby; do
    # shellcheck disable=SC2046 # no argument for the default (PostgreSQL) run
    DOCKET_BIN=$PWD/target/debug/docket scripts/chaos.sh --short $([ "$mode" = pg ] || echo "--$mode") \
      >"$chaos_logs/$mode.log" 2>&1 &
    chaos_pids+=($!)
  done
  chaos_failed=()
  i=0
  for mode in pg galera standby; do
    wait "${chaos_pids[$i]}" || chaos_failed+=("$mode")
    i=$((i + 1))
    echo "--- chaos ($mode)" >&2
    cat "$chaos_logs/$mode.log" >&2
  done
  rm -rf "$chaos_logs"
  if [ ${#chaos_failed[@]} -gt 0 ]; then
    say "chaos failed: ${chaos_failed[*]} (above)"
    exit 1
  fi
fi
say "done"
