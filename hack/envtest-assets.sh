#!/usr/bin/env bash
# Prints a directory holding kube-apiserver and etcd for envtest (KUBEBUILDER_ASSETS).
#
# Order: $KUBEBUILDER_ASSETS if it holds both binaries; then setup-envtest (where its
# download site is reachable); then build both from the Go module proxy into a cache
# outside the repository, keyed by version, so later runs reuse them.
set -euo pipefail

K8S_VERSION="${ENVTEST_K8S_VERSION:-1.34.5}"
ETCD_VERSION="${ENVTEST_ETCD_VERSION:-3.6.16}"
CACHE="${ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollouts-gatewayapi-ssa/envtest}"
DEST="$CACHE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"

log() { echo "envtest-assets: $*" >&2; }
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
have() { [ -x "$1/kube-apiserver" ] && [ -x "$1/etcd" ]; }

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && have "$KUBEBUILDER_ASSETS"; then
  echo "$KUBEBUILDER_ASSETS"; exit 0
fi
if have "$DEST"; then
  echo "$DEST"; exit 0
fi
if command -v setup-envtest >/dev/null 2>&1; then
  if dir=$(timeout 300 setup-envtest use -p path "$K8S_VERSION" 2>/dev/null) && have "$dir"; then
    echo "$dir"; exit 0
  fi
  log "setup-envtest could not provide $K8S_VERSION; building from the Go module proxy"
fi

mkdir -p "$DEST"
# One build at a time: a second caller waits and then finds the binaries.
exec 9>"$DEST/.lock"
flock 9
if have "$DEST"; then
  echo "$DEST"; exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GOWORK=off

if [ ! -x "$DEST/etcd" ]; then
  log "building etcd v$ETCD_VERSION (about a minute)"
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init envtest-etcd >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
  CGO_ENABLED=0 go build -o "$DEST/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
  mv "$DEST/etcd.tmp" "$DEST/etcd"
fi

if [ ! -x "$DEST/kube-apiserver" ]; then
  log "building kube-apiserver v$K8S_VERSION (about 10 minutes the first time)"
  mkdir -p "$work/apiserver" && cd "$work/apiserver"
  kubernetes_module "$K8S_VERSION" kube-apiserver
  CGO_ENABLED=0 go build -o "$DEST/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2
  mv "$DEST/kube-apiserver.tmp" "$DEST/kube-apiserver"
fi
echo "$DEST"
