#!/usr/bin/env bash
# Prints a directory holding the traefik binary that `make e2e` and `make demo`
# put in front of the test backends, building it from the Go module proxy into a
# cache outside the repository, keyed by version, when it is missing:
#
#   traefik   github.com/traefik/traefik/v3 v$E2E_TRAEFIK_VERSION/cmd/traefik, built in a
#             throwaway module (never this repository's go.mod)
#
# Traefik v3.7.x (default v3.7.13) needs three things the module proxy does not
# give by itself (docs/performance/traffic.md, "Traefik v3.7: how it is built, what it reads"):
#   - its nested module github.com/traefik/traefik/dynamic/ext is neither in its
#     zip nor served: a local stub module declaring the two types Traefik embeds
#     (`HTTP` and `Router`, both empty) is replaced in;
#   - its own replace directives (go-http-auth and mux forks) are copied, the
#     go-http-auth fork at the older pseudo-version the proxy serves;
#   - seven versions of lego's DNS-provider SDKs the proxy refuses are replaced by
#     the served ones v3.7.12 used, and one tencentcloud version is excluded.
# The older go-http-auth fork touches only the BasicAuth and DigestAuth
# middlewares, the DNS SDKs only ACME DNS challenges: a test gateway uses neither.
# Cold, on 2 cores: about 10 minutes with the modules to download, 184 MB.
set -euo pipefail

TRAEFIK_VERSION="${E2E_TRAEFIK_VERSION:-3.7.13}"
CACHE="${E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollouts-gatewayapi-ssa/e2e}"
DEST="$CACHE/traefik-$TRAEFIK_VERSION"

log() { echo "traefik-assets: $*" >&2; }

case "$TRAEFIK_VERSION" in
  3.7.*) ;;
  *) log "this script builds Traefik v3.7.x (E2E_TRAEFIK_VERSION=$TRAEFIK_VERSION)"; exit 1 ;;
esac

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

log "building Traefik v$TRAEFIK_VERSION (about 10 minutes on 2 cores the first time)"
start=$(date +%s)
mkdir -p "$work/ext"
cat > "$work/ext/go.mod" <<'MOD'
module github.com/traefik/traefik/dynamic/ext

go 1.24
MOD
cat > "$work/ext/ext.go" <<'GO'
// Package ext stands in for Traefik's nested module, which the module proxy
// does not serve: Traefik embeds these two types in its dynamic configuration.
package ext

// HTTP is embedded in Traefik's dynamic HTTP configuration.
type HTTP struct{}

// Router is embedded in Traefik's HTTP router configuration.
type Router struct{}
GO
cd "$work"
cat > go.mod <<MOD
module e2e-traefik

go 1.26

require github.com/traefik/traefik/v3 v$TRAEFIK_VERSION

replace github.com/traefik/traefik/dynamic/ext => ./ext

// Traefik's own replace directives; the go-http-auth fork at the pseudo-version
// the module proxy serves (it lacks a 2026-08 commit touching only the BasicAuth
// and DigestAuth middlewares).
replace (
	github.com/abbot/go-http-auth => github.com/containous/go-http-auth v0.4.1-0.20200324110947-a37a7636d23e
	github.com/gorilla/mux => github.com/containous/mux v0.0.0-20250523120546-41b6ec3aed59
)

// Versions of lego's DNS-provider SDKs the module proxy refuses, replaced by the
// served ones Traefik v3.7.12 used; they matter only to ACME DNS challenges.
replace (
	github.com/akamai/AkamaiOPEN-edgegrid-golang/v13 v13.4.0 => github.com/akamai/AkamaiOPEN-edgegrid-golang/v13 v13.3.0
	github.com/huaweicloud/huaweicloud-sdk-go-v3 v0.1.213 => github.com/huaweicloud/huaweicloud-sdk-go-v3 v0.1.205
	github.com/nrdcg/oci-go-sdk/common/v1065 v1065.124.0 => github.com/nrdcg/oci-go-sdk/common/v1065 v1065.120.0
	github.com/nrdcg/oci-go-sdk/dns/v1065 v1065.124.0 => github.com/nrdcg/oci-go-sdk/dns/v1065 v1065.120.0
	github.com/sacloud/sacloud-sdk-go v0.1.0 => github.com/sacloud/sacloud-sdk-go v0.2.0
	github.com/ucloud/ucloud-sdk-go v0.22.116 => github.com/ucloud/ucloud-sdk-go v0.22.90
	github.com/yandex-cloud/go-sdk/services/dns v0.0.94 => github.com/yandex-cloud/go-sdk/services/dns v0.0.65
)

exclude github.com/tencentcloud/tencentcloud-sdk-go v3.0.83+incompatible
MOD
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/traefik/traefik/v3/cmd/traefik"
GO
go mod tidy >&2
go build -trimpath -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=v$TRAEFIK_VERSION" \
  -o "$DEST/traefik.tmp" github.com/traefik/traefik/v3/cmd/traefik >&2
mv "$DEST/traefik.tmp" "$DEST/traefik"
log "built $DEST/traefik in $(( $(date +%s) - start ))s"
echo "$DEST"
