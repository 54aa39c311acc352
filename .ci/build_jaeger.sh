#!/usr/bin/env bash
# Builds Jaeger v2 all-in-one from the Go module proxy and caches the binary
# outside the repo. `go install` refuses the module (replace directives), so
# the module is downloaded, copied out and built in place.
set -euo pipefail
VERSION="${JAEGER_VERSION:-v1.76.0}"
CACHE="${PERFKIT_CACHE_DIR:-$HOME/.cache/litellm_perfkit}"
OUT="$CACHE/jaeger-$VERSION/jaeger"
if [ -x "$OUT" ]; then echo "$OUT"; exit 0; fi
command -v go >/dev/null || { echo "go toolchain not found: install Go to build Jaeger" >&2; exit 1; }
WORK="$(mktemp -d)"
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
export GOFLAGS=-mod=mod GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
DIR="$(cd "$WORK" && go mod download -json "github.com/jaegertracing/jaeger@$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
cp -r "$DIR" "$WORK/src" && chmod -R u+w "$WORK/src"
mkdir -p "$(dirname "$OUT")"
(cd "$WORK/src" && CGO_ENABLED=0 go build -o "$OUT.tmp" ./cmd/jaeger) >&2
mv "$OUT.tmp" "$OUT"
echo "$OUT"
