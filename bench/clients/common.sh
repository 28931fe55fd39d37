#!/usr/bin/env bash
# Shared by the native clients' contenders of ../shared/bench/peers (bench/clients/*/bench.sh):
# docket serve on the harness's $DATABASE_URL, the client's worker over HTTP against it.
# Sourced with CLIENT set (typescript, python, go) and ROOT the repository.
set -euo pipefail
BIN="$ROOT/target/release/docket"
SERVE_LOG=${SERVE_LOG:-/tmp/docket-bench-serve-$CLIENT.log}

# Starts docket serve on a free port; sets SERVER and SERVE_PID.
serve_start() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$BIN" serve --database "$DATABASE_URL" --listen "127.0.0.1:$port" --node "bench-$CLIENT" \
    --auth off --rate-limit 0 >"$SERVE_LOG" 2>&1 &
  SERVE_PID=$!
  # Stopped however the script ends (a worker that fails must not leave the server running).
  trap serve_stop EXIT
  SERVER="http://127.0.0.1:$port"
  for _ in $(seq 1 200); do
    curl -fs "$SERVER/healthz" >/dev/null 2>&1 && return
    sleep 0.05
  done
  echo "docket serve did not come up" >&2; cat "$SERVE_LOG" >&2; exit 1
}
serve_stop() { kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; }

common() {
  case "$1" in
    pending-sql) echo "select count(*) from docket_tasks where state not in ('completed','discarded','cancelled')" ;;
    setup) exec "$BIN" bench peer setup ;;
    enqueue) exec "$BIN" bench peer enqueue "$2" ;;
    *) return 1 ;;
  esac
}
