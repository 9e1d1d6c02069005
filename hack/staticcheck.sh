#!/usr/bin/env bash
# Prints the path of staticcheck, building it from the Go module proxy into a
# cache outside the repository (keyed by version) the first time, about a
# minute on 2 cores.
set -euo pipefail
VERSION="${STATICCHECK_VERSION:-0.8.2}"
CACHE="${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollouts-gatewayapi-ssa/tools}"
DEST="$CACHE/staticcheck-$VERSION"
if [ -x "$DEST/staticcheck" ]; then
  echo "$DEST/staticcheck"; exit 0
fi
mkdir -p "$DEST"
exec 9>"$DEST/.lock"
flock 9
if [ ! -x "$DEST/staticcheck" ]; then
  echo "staticcheck: building honnef.co/go/tools v$VERSION (about a minute)" >&2
  # Outside the repository, so the build neither reads nor changes its go.mod.
  (cd "$DEST" && GOWORK=off GOFLAGS=-mod=mod GOBIN="$DEST" go install "honnef.co/go/tools/cmd/staticcheck@v$VERSION" >&2)
fi
echo "$DEST/staticcheck"
