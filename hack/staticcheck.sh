#!/usr/bin/env bash
# Prints the path of staticcheck, building it from the Go module proxy into a
# cache outside the repository (keyed by version) the first time, about a
# minute on 2 cores.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
cached_tool staticcheck honnef.co/go/tools/cmd/staticcheck "${STATICCHECK_VERSION:-0.8.2}" "about a minute"
