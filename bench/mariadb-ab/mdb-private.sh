#!/usr/bin/env bash
# A private MariaDB on tmpfs (port 3320) for CPU-bound A/B runs: no disk noise.
set -euo pipefail
D=/dev/shm/mdb
if mariadb -h 127.0.0.1 -P 3320 -u root -e 'select 1' >/dev/null 2>&1; then echo up; exit 0; fi
rm -rf $D && mkdir -p $D/data && chown -R mysql:mysql $D
cat > $D/my.cnf <<CNF
[mariadbd]
datadir=$D/data
socket=$D/sock
pid-file=$D/pid
port=3320
bind-address=127.0.0.1
user=mysql
innodb_buffer_pool_size=2G
innodb_log_file_size=512M
skip-log-bin
CNF
mariadb-install-db --defaults-file=$D/my.cnf --auth-root-authentication-method=normal >/dev/null 2>&1
nohup /usr/sbin/mariadbd --defaults-file=$D/my.cnf >$D/err.log 2>&1 &
for _ in $(seq 1 60); do mariadb -h 127.0.0.1 -P 3320 -u root -e 'select 1' >/dev/null 2>&1 && break; sleep 1; done
mariadb -h 127.0.0.1 -P 3320 -u root -e "create database if not exists test"
echo started
