#!/usr/bin/env bash
# The TypeScript client's worker (clients/typescript) as a contender of ../shared/bench/peers:
#   CONTENDERS="graphile-worker $PWD/bench/clients/typescript" ../shared/bench/peers/run_all.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd); CLIENT=typescript
. "$ROOT/bench/clients/common.sh"
case "${1:-}" in
  install) (cd "$ROOT" && cargo build --release -q -p docket)
           (cd "$ROOT/clients/typescript" && { [ -d node_modules ] || npm ci --no-audit --no-fund -s; }) ;;
  version) echo "@docket/client 0.1.0 (node $(node --version)), docket $("$BIN" --version | cut -d' ' -f2)" ;;
  variants) echo "c10 10 default 3"; echo "c10-prefetch 10 prefetch 3"; echo "c24-prefetch 24 prefetch 3"
           # 10 claims of 1,000 in flight, as the HTTP work path (c10-http) keeps
           echo "c24-deep 24 deep 3" ;;
  work) serve_start; node "$HERE/bench.mjs" work "$SERVER" "$2" "$3" "$4"; serve_stop ;;
  latency) serve_start; node "$HERE/bench.mjs" latency "$SERVER" "$2" "$3" "$4"; serve_stop ;;
  *) common "$@" || { echo "unknown command ${1:-}" >&2; exit 2; } ;;
esac
