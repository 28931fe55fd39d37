#!/usr/bin/env bash
# Server counters (statements, handler calls) of one bench run per build: what each does per task.
set -uo pipefail
N=${N:-20000}
m() { mariadb -h 127.0.0.1 -P 3320 -u root -N -B "$@"; }
snap() { m -e "show global status where variable_name in ('Com_select','Com_insert','Com_update','Com_delete','Com_commit','Com_begin','Questions','Handler_read_key','Handler_read_next','Handler_read_rnd_next','Handler_write','Handler_update','Handler_delete','Handler_read_prev','Innodb_rows_read','Innodb_rows_inserted','Innodb_rows_updated','Innodb_rows_deleted','Created_tmp_tables','Select_scan','Sort_rows','Handler_tmp_write')"; }
for v in old new; do
  case $v in old) BIN=${OLD_BIN:?OLD_BIN: the docket binary of the older commit} ;; new) BIN=${NEW_BIN:-target/debug/docket} ;; esac
  db=cn_$v; m -e "drop database if exists $db; create database $db"
  url=mysql://root@127.0.0.1:3320/$db
  $BIN migrate --database "$url" >/dev/null 2>&1
  snap > /tmp/c0; $BIN bench --database "$url" -n $N -c 10 --latency-secs 0 >/dev/null 2>&1; snap > /tmp/c1
  join /tmp/c0 /tmp/c1 | awk -v v=$v -v n=$N '{printf "%s %s %.2f\n", v, $1, ($3-$2)/n}' > /tmp/cn_$v
  m -e "drop database $db"
done
join -j 2 <(awk '{print $1"_"$2, $2, $3}' /tmp/cn_old | awk '{print $2, $3}' | sort) <(awk '{print $2, $3}' /tmp/cn_new | sort) | awk '{printf "%-24s old %8.2f new %8.2f per task\n", $1, $2, $3}'
