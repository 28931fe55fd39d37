#!/usr/bin/env bash
# Builds the book (docs/, mdBook) into target/book, renders the HTTP API reference from
# crates/docket-server/openapi.json into it (Redocly's CLI), and checks every link of the result
# offline: each page, image and anchor a page links to must exist in the book, and no link may
# leave the repository except to a public site (http(s) links are not fetched: CI has no
# network beyond the registries).
#   scripts/docs.sh            # build and check
#   scripts/docs.sh --open     # and print where the book is
# The tools are installed when missing: mdbook from crates.io (cargo install, once per machine
# under ~/.cache/docket), @redocly/cli from npm and linkchecker from PyPI under target/docs-tools.
set -euo pipefail
cd "$(dirname "$0")/.."
MDBOOK_VERSION=0.5.4
REDOCLY_VERSION=2.77.0
LINKCHECKER_VERSION=10.6.0
tools=$PWD/target/docs-tools
book=$PWD/target/book
say() { echo "[docs.sh] $*" >&2; }

mkdir -p "$tools"
# mdbook takes minutes to build: once per machine, outside the checkout (as scripts/test.sh
# keeps tansu), so a clean clone does not build it again. DOCKET_TOOLS_DIR moves it.
mdbook_root=${DOCKET_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/docket}/mdbook-$MDBOOK_VERSION
mdbook=$mdbook_root/bin/mdbook
if ! [ -x "$mdbook" ] || ! "$mdbook" --version | grep -q "v$MDBOOK_VERSION"; then
  say "installing mdbook $MDBOOK_VERSION into $mdbook_root (cargo install, a few minutes)"
  # Unoptimised (`--debug`, no debug information): it builds a 50-page book in a second either
  # way, and the optimised build took minutes of a fresh machine's CI.
  CARGO_PROFILE_DEV_DEBUG=false cargo install mdbook --locked --debug --version "$MDBOOK_VERSION" \
    --root "$mdbook_root" --quiet
fi
redocly=$tools/node_modules/.bin/redocly
if ! [ -x "$redocly" ] || ! grep -q "\"version\": \"$REDOCLY_VERSION\"" "$tools/node_modules/@redocly/cli/package.json"; then
  say "installing @redocly/cli $REDOCLY_VERSION (npm)"
  npm install --prefix "$tools" --no-audit --no-fund --silent "@redocly/cli@$REDOCLY_VERSION" >/dev/null
fi
venv=$tools/linkchecker-venv
if ! [ -x "$venv/bin/linkchecker" ]; then
  say "installing linkchecker $LINKCHECKER_VERSION (PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "linkchecker==$LINKCHECKER_VERSION"
fi

# Links out of the repository other than to public sites: the sibling ../shared folder, absolute
# file paths, localhost. (Links to public sites are fine; they are not fetched.)
if grep -rnE '\]\((\.\./)+shared|\]\(/|\]\(file:|\]\(https?://(127\.0\.0\.1|localhost)' docs/src; then
  say "docs link out of the repository (above)"
  exit 1
fi

say "building the book: $mdbook build docs"
rm -rf "$book"
"$mdbook" build docs >/dev/null
cp crates/docket-server/openapi.json "$book/api/openapi.json"
say "rendering the API reference: redocly build-docs"
NO_UPDATE_NOTIFIER=1 REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
  "$redocly" build-docs crates/docket-server/openapi.json --inlineBundle --title "docket HTTP API" \
  --output "$book/api/reference.html" >/dev/null 2>"$tools/redocly.log" || { cat "$tools/redocly.log" >&2; exit 1; }
grep -qE "<script[^>]* src=\"https?:" "$book/api/reference.html" && { say "the API reference loads scripts from a CDN"; exit 1; }

# Internal links, images and anchors of every page; external URLs are listed, not fetched.
# linkchecker drops root privileges to `nobody`, which must be able to read the book.
cat > "$tools/linkcheckerrc" <<'EOF'
[filtering]
checkextern=0
ignorewarnings=url-content-size-zero
[AnchorCheck]
[output]
status=0
EOF
chmod -R a+rX "$book" "$tools/linkcheckerrc"
say "checking links: linkchecker (offline)"
if ! "$venv/bin/linkchecker" --config "$tools/linkcheckerrc" --no-status \
    "$book/index.html" > "$tools/linkcheck.txt" 2>&1; then
  cat "$tools/linkcheck.txt" >&2
  say "broken links (above)"
  exit 1
fi
say "book: $book/index.html ($(find "$book" -name '*.html' | wc -l) pages), links checked"
