package harness

import (
	"archive/zip"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// GatewayAPIModule is the module whose releases carry the Gateway API CRDs.
const GatewayAPIModule = "sigs.k8s.io/gateway-api"

// Releases are the Gateway API releases the compatibility matrix installs
// (docs/compatibility.md), oldest first: what managed providers install
// beside the clusters users run, up to the newest. This module builds
// against v1.6.3.
var Releases = []string{"v1.2.1", "v1.3.0", "v1.4.1", "v1.5.1", "v1.6.3", "v1.7.0"}

// ReleaseCRDs reads the gateway.networking.k8s.io CRDs of a Gateway API
// release's channel (Standard or Experimental) from the release's module zip
// in the Go module cache, fetched from the Go module proxy when missing. The
// zip is read as it is, never built or extracted: a release may need a newer
// Go than this one (v1.7.0 needs Go 1.27). Files of the channel's folder that
// are not Gateway API CRDs (x-k8s.io CRDs, the ValidatingAdmissionPolicy of
// v1.5 and later, kustomization.yaml) are left out.
func ReleaseCRDs(release string, ch Channel) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if ch != Standard && ch != Experimental {
		return nil, fmt.Errorf("no channel %q in Gateway API %s: only %s and %s", ch, release, Standard, Experimental)
	}
	m, err := download(GatewayAPIModule + "@" + release)
	if err != nil {
		return nil, err
	}
	if m.Zip == "" {
		return nil, fmt.Errorf("go mod download %s@%s: no zip: %s", GatewayAPIModule, release, m.Error)
	}
	zr, err := zip.OpenReader(m.Zip)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	folder := GatewayAPIModule + "@" + release + "/config/crd/" + string(ch) + "/"
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range zr.File {
		name, inFolder := strings.CutPrefix(f.Name, folder)
		if ok, _ := path.Match("gateway.networking.k8s.io_*.yaml", name); !inFolder || !ok {
			continue
		}
		crds, err := readZipped(f)
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", f.Name, m.Zip, err)
		}
		out = append(out, crds...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRDs in %s under %s", m.Zip, folder)
	}
	slices.SortFunc(out, func(a, b *apiextensionsv1.CustomResourceDefinition) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func readZipped(f *zip.File) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return decodeCRDs(data)
}

// StartRelease is Start with the route CRDs of a Gateway API release's
// channel (ReleaseCRDs) instead of this module's.
func StartRelease(release string, ch Channel) (*Cluster, error) {
	crds, err := ReleaseCRDs(release, ch)
	if err != nil {
		return nil, err
	}
	return start(crds)
}
