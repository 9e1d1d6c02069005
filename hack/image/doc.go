// Command image writes the plugin's OCI image without Docker: one layer
// holding the static binary of hack/release.sh at /rollouts-gatewayapi-ssa,
// on an empty base (FROM scratch), run as 65532:65532, one manifest per
// Linux platform under one index, in an OCI image layout. The same binaries,
// version and created time give the same digests. After writing, it reads
// the layout back and checks every platform's binary against SHA256SUMS and
// its config (check.go); with -push it sends the index to a registry.
//
// It is its own module so that the plugin's go.mod gains nothing of
// go-containerregistry. make image and make release run it (docs/image.md).
package main
