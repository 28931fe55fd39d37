#!/usr/bin/env bash
# The Python client's worker (clients/python) as a contender of ../shared/bench/peers:
#   CONTENDERS="procrastinate $PWD/bench/clients/python" ../shared/bench/peers/run_all.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd); CLIENT=python
. "$ROOT/bench/clients/common.sh"
VENV=$ROOT/target/bench-python-venv
case "${1:-}" in
  install) (cd "$ROOT" && cargo build --release -q -p docket)
           [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
           "$VENV/bin/pip" install -q "$ROOT/clients/python" ;;
  version) echo "docket-client 0.1.0 ($("$VENV/bin/python" --version), httpx $("$VENV/bin/python" -c 'import httpx; print(httpx.__version__)')), docket $("$BIN" --version | cut -d' ' -f2)" ;;
  variants) echo "c10 10 default 3"; echo "c10-prefetch 10 prefetch 3"; echo "c24-prefetch 24 prefetch 3"
           # 10 claims of 1,000 in flight, as the HTTP work path (c10-http) keeps
           echo "c24-deep 24 deep 3" ;;
  work) serve_start; "$VENV/bin/python" "$HERE/bench.py" work "$SERVER" "$2" "$3" "$4"; serve_stop ;;
  latency) serve_start; "$VENV/bin/python" "$HERE/bench.py" latency "$SERVER" "$2" "$3" "$4"; serve_stop ;;
  *) common "$@" || { echo "unknown command ${1:-}" >&2; exit 2; } ;;
esac
