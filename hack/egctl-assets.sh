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
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
cached_tool egctl github.com/envoyproxy/gateway/cmd/egctl "${EGCTL_VERSION:-1.9.1}" "about 7 minutes on 2 cores the first time"
