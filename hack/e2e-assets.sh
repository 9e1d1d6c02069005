#!/usr/bin/env bash
# Prints a directory holding what `make e2e` needs besides kube-apiserver and etcd
# (those come from hack/envtest-assets.sh), building whatever is missing from the
# Go module proxy into a cache outside the repository, keyed by version:
#
#   kube-controller-manager, kube-scheduler   k8s.io/kubernetes v$E2E_K8S_VERSION
#   kwok                                      sigs.k8s.io/kwok v$E2E_KWOK_VERSION
#   kwok-stage/                               that module's kustomize/stage/ files
#   rollouts-controller                       github.com/argoproj/argo-rollouts v$E2E_ROLLOUTS_VERSION,
#                                             metrics/healthz listening on 127.0.0.1 instead of 0.0.0.0
#   rollouts-crds/                            that module's manifests/crds/*.yaml
#
# Cold, on 2 cores: about 2 minutes for the two kube binaries (more if kube-apiserver
# was never built on this machine), 2.5 for kwok, 5.5 for the Rollouts controller.
set -euo pipefail

K8S_VERSION="${E2E_K8S_VERSION:-${ENVTEST_K8S_VERSION:-1.34.5}}"
KWOK_VERSION="${E2E_KWOK_VERSION:-0.8.0}"
ROLLOUTS_VERSION="${E2E_ROLLOUTS_VERSION:-1.10.1}"
CACHE="${E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollouts-gatewayapi-ssa/e2e}"
DEST="$CACHE/k8s-$K8S_VERSION-kwok-$KWOK_VERSION-rollouts-$ROLLOUTS_VERSION"

log() { echo "e2e-assets: $*" >&2; }
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
have_all() {
  [ -x "$DEST/kube-controller-manager" ] && [ -x "$DEST/kube-scheduler" ] &&
    [ -x "$DEST/kwok" ] && [ -d "$DEST/kwok-stage" ] &&
    [ -x "$DEST/rollouts-controller" ] && [ -d "$DEST/rollouts-crds" ]
}

if have_all; then
  echo "$DEST"; exit 0
fi

mkdir -p "$DEST"
# One build at a time: a second caller waits and then finds the binaries.
exec 9>"$DEST/.lock"
flock 9
if have_all; then
  echo "$DEST"; exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS="-mod=mod -buildvcs=false" GOWORK=off CGO_ENABLED=0

if [ ! -x "$DEST/kube-controller-manager" ] || [ ! -x "$DEST/kube-scheduler" ]; then
  log "building kube-controller-manager and kube-scheduler v$K8S_VERSION (about 2 minutes after kube-apiserver, 12 from nothing)"
  mkdir -p "$work/kube" && cd "$work/kube"
  kubernetes_module "$K8S_VERSION" kube-controller-manager kube-scheduler
  for b in kube-controller-manager kube-scheduler; do
    go build -o "$DEST/$b.tmp" "k8s.io/kubernetes/cmd/$b" >&2
    mv "$DEST/$b.tmp" "$DEST/$b"
  done
fi

if [ ! -x "$DEST/kwok" ] || [ ! -d "$DEST/kwok-stage" ]; then
  log "building kwok v$KWOK_VERSION (about 2.5 minutes)"
  mkdir -p "$work/kwok-bin"
  (cd "$work" && GOFLAGS=-buildvcs=false GOBIN="$work/kwok-bin" go install "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION" >&2)
  dir=$(cd "$work" && gomod_field "sigs.k8s.io/kwok@v$KWOK_VERSION" Dir)
  rm -rf "$DEST/kwok-stage.tmp" && cp -r "$dir/kustomize/stage" "$DEST/kwok-stage.tmp" && chmod -R u+w "$DEST/kwok-stage.tmp"
  mv "$work/kwok-bin/kwok" "$DEST/kwok"
  rm -rf "$DEST/kwok-stage" && mv "$DEST/kwok-stage.tmp" "$DEST/kwok-stage"
fi

if [ ! -x "$DEST/rollouts-controller" ] || [ ! -d "$DEST/rollouts-crds" ]; then
  log "building the Argo Rollouts controller v$ROLLOUTS_VERSION (about 5.5 minutes)"
  mkdir -p "$work/rollouts" && cd "$work/rollouts"
  go mod init e2e-rollouts >/dev/null 2>&1
  modfile=$(gomod_field "github.com/argoproj/argo-rollouts@v$ROLLOUTS_VERSION" GoMod)
  dir=$(gomod_field "github.com/argoproj/argo-rollouts@v$ROLLOUTS_VERSION" Dir)
  copy_replaces "$modfile"
  go mod edit -require "github.com/argoproj/argo-rollouts@v$ROLLOUTS_VERSION"
  # The one source change: the controller's metrics and healthz servers listen on
  # 0.0.0.0; tests here bind only to loopback. A copy of the module with that
  # constant changed replaces the original; everything else is v$ROLLOUTS_VERSION as released.
  cp -r "$dir" "$work/argo-rollouts" && chmod -R u+w "$work/argo-rollouts"
  sed -i 's/listenAddr\( *\)= "0\.0\.0\.0:%d"/listenAddr\1= "127.0.0.1:%d"/' "$work/argo-rollouts/controller/controller.go"
  if ! grep -q '"127.0.0.1:%d"' "$work/argo-rollouts/controller/controller.go" ||
     grep -rq --include='*.go' --exclude='*_test.go' '"0\.0\.0\.0:%d"' "$work/argo-rollouts/controller/"; then
    log "could not move the controller's listeners to 127.0.0.1 (controller/controller.go changed?)"; exit 1
  fi
  go mod edit -replace "github.com/argoproj/argo-rollouts=../argo-rollouts"
  cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
GO
  go mod tidy >&2
  go build -o "$DEST/rollouts-controller.tmp" github.com/argoproj/argo-rollouts/cmd/rollouts-controller >&2
  rm -rf "$DEST/rollouts-crds.tmp" && mkdir -p "$DEST/rollouts-crds.tmp"
  cp "$dir"/manifests/crds/*.yaml "$DEST/rollouts-crds.tmp/" && chmod u+w "$DEST"/rollouts-crds.tmp/*
  mv "$DEST/rollouts-controller.tmp" "$DEST/rollouts-controller"
  rm -rf "$DEST/rollouts-crds" && mv "$DEST/rollouts-crds.tmp" "$DEST/rollouts-crds"
fi
echo "$DEST"
