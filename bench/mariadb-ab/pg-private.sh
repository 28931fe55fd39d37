#!/usr/bin/env bash
# A private PostgreSQL on tmpfs (port 5440) for CPU-bound A/B runs: no disk noise, nothing else
# connected. Run as root (initdb and the server run as the postgres user).
set -euo pipefail
D=/dev/shm/pgab
BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
if "$BIN/pg_isready" -q -h 127.0.0.1 -p 5440; then echo up; exit 0; fi
rm -rf $D && mkdir -p $D && chown postgres:postgres $D
su postgres -c "$BIN/initdb -D $D/data -U postgres --auth=trust" >/dev/null
su postgres -c "$BIN/pg_ctl -D $D/data -l $D/log -w start -o '-p 5440 -c listen_addresses=127.0.0.1 -c unix_socket_directories=$D -c shared_buffers=1GB -c max_connections=200'" >/dev/null
echo started
