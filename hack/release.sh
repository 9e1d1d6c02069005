#!/usr/bin/env bash
# Builds the release: one static binary per platform the Argo Rollouts
# controller image is published for (linux/amd64, linux/arm64), the same
# binary for macOS (darwin/amd64, darwin/arm64: its plan, inspect and cleanup
# commands run from a laptop), a SHA256SUMS file, and for each Linux binary
# the trafficRouterPlugins entry of the argo-rollouts-config ConfigMap with
# its sha256, ready to paste.
#
#   VERSION   stamped into the binary (-version, and every log line); default: git describe
#   DIST      output folder; default dist
#   BASE_URL  where the binaries will be downloaded from; default: this version's GitHub release
#   PLATFORMS the os/arch pairs to build; default: the four above
#   IMAGE     the name of the plugin's image; default: ghcr.io/gatewayapi-ssa/rollouts-plugin
#   PUSH      a reference (REGISTRY/REPO:TAG) to push the image to; default: none
#
# The Linux binaries also go into the plugin's OCI image (hack/image, its own
# module: go-containerregistry, no Docker), written to $DIST/image, read back
# and checked; $DIST/IMAGE-DIGEST has its reference with the digest.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
DIST="${DIST:-dist}"
BASE_URL="${BASE_URL:-https://github.com/gatewayapi-ssa/rollouts-plugin/releases/download/$VERSION}"
PLATFORMS="${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}"
IMAGE="${IMAGE:-ghcr.io/gatewayapi-ssa/rollouts-plugin}"
# Read with VERSION, before the builds: the image's revision label and its
# created time (the commit's: the same commit gives the same digest).
REVISION="$(git rev-parse HEAD 2>/dev/null || true)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
NAME=rollouts-gatewayapi-ssa

rm -rf "$DIST" && mkdir -p "$DIST"
for p in $PLATFORMS; do
  os=${p%/*} arch=${p#*/}
  # Static (no cgo), no local paths, no build id: the same source and Go version give the same bytes.
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -buildid= -X main.version=$VERSION" -o "$DIST/$NAME-$os-$arch" .
done
(cd "$DIST" && sha256sum "$NAME"-* > SHA256SUMS && sha256sum --quiet -c SHA256SUMS)

# The binary for this machine must say its version, and every binary must be static.
host="$DIST/$NAME-$(go env GOOS)-$(go env GOARCH)"
if [ -x "$host" ] && [ "$("$host" -version)" != "$VERSION" ]; then
  echo "release: $host -version says $("$host" -version), want $VERSION" >&2; exit 1
fi
for p in $PLATFORMS; do
  go version -m "$DIST/$NAME-${p%/*}-${p#*/}" | grep -q 'CGO_ENABLED=0' ||
    { echo "release: $NAME-${p%/*}-${p#*/} is not a static build" >&2; exit 1; }
done

echo "release $VERSION in $DIST/:"
cat "$DIST/SHA256SUMS"
for p in $PLATFORMS; do
  [ "${p%/*}" = linux ] || continue # the controller runs on Linux; the others are for the commands
  file="$NAME-${p%/*}-${p#*/}"
  sum=$(awk -v f="$file" '$2 == f {print $1}' "$DIST/SHA256SUMS")
  cat <<ENTRY

# argo-rollouts-config, data.trafficRouterPlugins, for a controller on $p:
- name: "argoproj-labs/gatewayAPI"
  location: "$BASE_URL/$file"
  sha256: "$sum"
ENTRY
done

linux=$(for p in $PLATFORMS; do [ "${p%/*}" != linux ] || printf '%s ' "$p"; done)
[ -n "$linux" ] || exit 0
echo
go -C hack/image run . -dist "$(cd "$DIST" && pwd)" -platforms "$linux" -version "$VERSION" -image "$IMAGE" \
  -revision "$REVISION" ${PUSH:+-push "$PUSH"}
digest=$(sed -n '1s/.*@//p' "$DIST/IMAGE-DIGEST")
cat <<IMAGES

# kustomization.yaml, images: (the initContainer of install/), once pushed to your registry:
- name: ghcr.io/gatewayapi-ssa/rollouts-plugin
  newName: $IMAGE # or REGISTRY/REPO you pushed it to
  newTag: "$VERSION"
  digest: $digest
IMAGES
