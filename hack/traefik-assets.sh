#!/usr/bin/env bash
# Prints a directory holding the traefik binary that `make e2e` and `make demo`
# put in front of the test backends, building it from the Go module proxy into a
# cache outside the repository, keyed by version, when it is missing:
#
#   traefik   github.com/traefik/traefik/v3 v$E2E_TRAEFIK_VERSION/cmd/traefik, built in a
#             throwaway module that copies that module's replace and exclude directives
#
# Traefik v3.6.x only: v3.7.13 cannot be built from the module proxy here. Its
# nested module github.com/traefik/traefik/dynamic/ext is missing from its zip
# and is not served, and even with that module supplied, the proxy refuses 15
# module versions v3.7.13 requires (checked 2026-12-03; docs/e2e.md).
# Cold, on 2 cores: about 12 minutes, 245 MB.
set -euo pipefail

TRAEFIK_VERSION="${E2E_TRAEFIK_VERSION:-3.6.12}"
CACHE="${E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollouts-gatewayapi-ssa/e2e}"
DEST="$CACHE/traefik-$TRAEFIK_VERSION"

log() { echo "traefik-assets: $*" >&2; }
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"

if [ -x "$DEST/traefik" ]; then
  echo "$DEST"; exit 0
fi
mkdir -p "$DEST"
# One build at a time: a second caller waits and then finds the binary.
exec 9>"$DEST/.lock"
flock 9
if [ -x "$DEST/traefik" ]; then
  echo "$DEST"; exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS="-mod=mod -buildvcs=false" GOWORK=off CGO_ENABLED=0

log "building Traefik v$TRAEFIK_VERSION (about 12 minutes on 2 cores the first time)"
start=$(date +%s)
cd "$work"
go mod init e2e-traefik >/dev/null 2>&1
modfile=$(gomod_field "github.com/traefik/traefik/v3@v$TRAEFIK_VERSION" GoMod)
copy_replaces "$modfile"
copy_excludes "$modfile"
go mod edit -require "github.com/traefik/traefik/v3@v$TRAEFIK_VERSION"
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/traefik/traefik/v3/cmd/traefik"
GO
go mod tidy >&2
go build -trimpath -o "$DEST/traefik.tmp" github.com/traefik/traefik/v3/cmd/traefik >&2
mv "$DEST/traefik.tmp" "$DEST/traefik"
log "built $DEST/traefik in $(( $(date +%s) - start ))s"
echo "$DEST"
