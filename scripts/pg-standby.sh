#!/usr/bin/env bash
# A PostgreSQL primary with a synchronous standby on this machine (issue 38), from Debian's
# PostgreSQL packages: two clusters of the newest installed version on 127.0.0.1, trust auth.
#   scripts/pg-standby.sh start      # start what is down (creates both the first time)
#   scripts/pg-standby.sh stop       # stop both (their data stays)
#   scripts/pg-standby.sh status     # each server's port and role, and the replication state
#   scripts/pg-standby.sh fail       # the failover: SIGKILL the primary, promote the standby (it
#                                    # then runs alone, synchronous_standby_names cleared)
#   scripts/pg-standby.sh rejoin     # the dead server back as the new primary's synchronous
#                                    # standby (a fresh base backup), sync commits required again
#   scripts/pg-standby.sh urls       # postgres://postgres@127.0.0.1:5441,127.0.0.1:5442/postgres
# Servers: a on 5441, b on 5442. Data in $PGHA_DIR (default /var/lib/docket-pgha), run as the
# postgres user. Commits wait for the standby (synchronous_commit = on,
# synchronous_standby_names = '*'), so what the primary acknowledged is on both.
set -euo pipefail
DIR=${PGHA_DIR:-/var/lib/docket-pgha}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
say() { echo "[pg-standby.sh] $*" >&2; }
[ -x "${PGBIN:-}/initdb" ] || { say "PostgreSQL's server binaries are missing (scripts/test.sh installs them)"; exit 1; }

port() { case $1 in a) echo 5441 ;; b) echo 5442 ;; esac; }
other() { case $1 in a) echo b ;; b) echo a ;; esac; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
q() { psql "postgres://postgres@127.0.0.1:$(port "$1")/postgres" -XAtq -c "$2" 2>/dev/null; }
up() { as_pg "$PGBIN/pg_ctl" -D "$DIR/$1" status >/dev/null 2>&1 && q "$1" "select 1" >/dev/null; }
role() { # primary | standby | down
  if ! up "$1"; then echo down; elif [ "$(q "$1" 'select pg_is_in_recovery()')" = t ]; then echo standby; else echo primary; fi
}
launch() {
  as_pg "$PGBIN/pg_ctl" -D "$DIR/$1" -l "$DIR/$1.log" -w -t 60 \
    -o "-p $(port "$1") -k $DIR -c listen_addresses=127.0.0.1" start >/dev/null
}
primary_of() { for s in a b; do [ "$(role "$s")" = primary ] && { echo "$s"; return; }; done; echo ""; }

base_backup() { # standby-name primary-name
  rm -rf "${DIR:?}/$1"
  as_pg "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$(port "$2")" -U postgres -D "$DIR/$1" -R \
    -X stream -c fast -d "application_name=$1" >/dev/null
  chmod 700 "$DIR/$1"
}

wait_sync() { # primary
  for _ in $(seq 1 60); do
    [ "$(q "$1" "select count(*) from pg_stat_replication where sync_state = 'sync'")" = 1 ] && return 0
    sleep 0.5
  done
  say "the standby did not become synchronous"; return 1
}

create() {
  say "creating a primary (a, 5441) and its synchronous standby (b, 5442) in $DIR"
  rm -rf "$DIR"; mkdir -p "$DIR"; chown postgres "$DIR" 2>/dev/null || true
  as_pg "$PGBIN/initdb" -D "$DIR/a" -U postgres --auth=trust >/dev/null
  cat >> "$DIR/a/postgresql.conf" <<EOF
wal_level = replica
max_wal_senders = 10
hot_standby = on
synchronous_commit = on
synchronous_standby_names = '*'
wal_keep_size = 256MB
max_connections = 300
EOF
  echo "host replication all 127.0.0.1/32 trust" >> "$DIR/a/pg_hba.conf"
  launch a
  base_backup b a
  launch b
  wait_sync a
}

start() {
  if [ ! -f "$DIR/a/PG_VERSION" ]; then create; return; fi
  for s in a b; do up "$s" || launch "$s" || true; done
  local p; p=$(primary_of)
  if [ -z "$p" ]; then say "no primary: promote one (fail) or rebuild ($DIR)"; return 1; fi
  if [ "$(role "$(other "$p")")" != standby ]; then rejoin; else wait_sync "$p" || rejoin; fi
}

fail() {
  local p s pid
  p=$(primary_of); s=$(other "$p")
  [ -n "$p" ] && [ "$(role "$s")" = standby ] || { say "no primary with a standby to fail over to"; return 1; }
  pid=$(head -1 "$DIR/$p/postmaster.pid")
  say "SIGKILL the primary $p (pid $pid), promote $s"
  kill -9 "$pid"
  as_pg "$PGBIN/pg_ctl" -D "$DIR/$s" -w promote >/dev/null
  # Alone now: commits cannot wait for a standby that is not there.
  q "$s" "alter system set synchronous_standby_names = ''" >/dev/null
  q "$s" "select pg_reload_conf()" >/dev/null
  # The killed server's postmaster is gone; stop what is left of it.
  as_pg "$PGBIN/pg_ctl" -D "$DIR/$p" -m immediate stop >/dev/null 2>&1 || true
}

rejoin() {
  local p s
  p=$(primary_of); s=$(other "$p")
  as_pg "$PGBIN/pg_ctl" -D "$DIR/$s" -m immediate stop >/dev/null 2>&1 || true
  say "$s back as the synchronous standby of $p"
  base_backup "$s" "$p"
  launch "$s"
  q "$p" "alter system set synchronous_standby_names = '*'" >/dev/null
  q "$p" "select pg_reload_conf()" >/dev/null
  wait_sync "$p"
}

case "${1:-start}" in
  start) start ;;
  stop) for s in a b; do as_pg "$PGBIN/pg_ctl" -D "$DIR/$s" -m fast stop >/dev/null 2>&1 || true; done ;;
  status)
    for s in a b; do echo "$s 127.0.0.1:$(port "$s") $(role "$s")"; done
    p=$(primary_of); [ -n "$p" ] && q "$p" "select application_name, state, sync_state from pg_stat_replication" ;;
  fail) fail ;;
  rejoin) rejoin ;;
  urls) echo "postgres://postgres@127.0.0.1:5441,127.0.0.1:5442/postgres" ;;
  *) echo "usage: $0 start | stop | status | fail | rejoin | urls" >&2; exit 2 ;;
esac
