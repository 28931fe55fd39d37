#!/usr/bin/env bash
# The Go client's worker (clients/go) as a contender of ../shared/bench/peers:
#   CONTENDERS="$PWD/bench/clients/go" ../shared/bench/peers/run_all.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd); CLIENT=go
. "$ROOT/bench/clients/common.sh"
GOBIN_OUT=$ROOT/target/bench-go-worker
case "${1:-}" in
  install) (cd "$ROOT" && cargo build --release -q -p docket)
           # A fresh machine has no Go: Debian's golang-go, as clients/test.sh installs it.
           command -v go >/dev/null || { apt-get update -qq &&
             DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null; }
           (cd "$HERE" && GOPROXY=off GOFLAGS=-mod=mod go build -o "$GOBIN_OUT" .) ;;
  version) echo "docket client-go 0.1.0 ($(go version | cut -d' ' -f3)), docket $("$BIN" --version | cut -d' ' -f2)" ;;
  variants) echo "c10 10 default 3"; echo "c10-prefetch 10 prefetch 3"; echo "c24-prefetch 24 prefetch 3"
           # 10 claims of 1,000 in flight, as the HTTP work path (c10-http) keeps
           echo "c24-deep 24 deep 3" ;;
  work) serve_start; "$GOBIN_OUT" work "$SERVER" "$2" "$3" "$4"; serve_stop ;;
  latency) serve_start; "$GOBIN_OUT" latency "$SERVER" "$2" "$3" "$4"; serve_stop ;;
  *) common "$@" || { echo "unknown command ${1:-}" >&2; exit 2; } ;;
esac
