#!/usr/bin/env bash
# Prints the path of egctl, Envoy Gateway's command line, building it from the Go
# module proxy into a cache outside the repository (keyed by version) the first
# time: github.com/envoyproxy/gateway v$EGCTL_VERSION/cmd/egctl (its go.mod asks for
# go 1.26.7: no GOTOOLCHAIN change). Measured on 2 shared cores on 2026-12-07: 6 min 39 s
# with empty module and build caches, 2.4 GB of build cache; 200 MB binary. `make envoy`
# uses its offline translator, `egctl x translate`, which turns Gateway API objects into
# Envoy's xDS the way that control plane does.
# EGCTL overrides the whole thing with a binary of your own.
set -euo pipefail
if [ -n "${EGCTL:-}" ]; then
  [ -x "$EGCTL" ] || { echo "egctl-assets: EGCTL=$EGCTL is not an executable" >&2; exit 1; }
  echo "$EGCTL"; exit 0
fi
VERSION="${EGCTL_VERSION:-1.9.1}"
CACHE="${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollouts-gatewayapi-ssa/tools}"
DEST="$CACHE/egctl-$VERSION"
if [ -x "$DEST/egctl" ]; then
  echo "$DEST/egctl"; exit 0
fi
mkdir -p "$DEST"
# One build at a time: a second caller waits and then finds the binary.
exec 9>"$DEST/.lock"
flock 9
if [ ! -x "$DEST/egctl" ]; then
  echo "egctl-assets: building github.com/envoyproxy/gateway v$VERSION/cmd/egctl (about 7 minutes on 2 cores the first time)" >&2
  start=$(date +%s)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # Outside the repository, so the build neither reads nor changes its go.mod;
  # into a scratch GOBIN first, so a failed build leaves no binary behind.
  (cd "$work" && GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOBIN="$work/bin" \
    go install -ldflags "-s -w" "github.com/envoyproxy/gateway/cmd/egctl@v$VERSION" >&2)
  mv "$work/bin/egctl" "$DEST/egctl"
  echo "egctl-assets: built $DEST/egctl in $(( $(date +%s) - start ))s" >&2
fi
echo "$DEST/egctl"
