package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// binaryName is the file name of the plugin in dist/ (with -OS-ARCH)
	// and at the image's root.
	binaryName = "rollouts-gatewayapi-ssa"
	// binaryPath is where the image holds the plugin, and its entrypoint:
	// install/ runs ["/rollouts-gatewayapi-ssa", "copy", DEST].
	binaryPath = "/" + binaryName
	// user is the image's user: nobody's uid and gid in distroless images.
	user = "65532:65532"
)

// release is what an image is built from: hack/release.sh's binaries and
// what the labels say.
type release struct {
	version, revision, source string
	// created is the time in the config and of the file in the layer.
	created  time.Time
	binaries []binary
}

// binary is one platform's plugin binary in dist/ and its sum in
// SHA256SUMS.
type binary struct {
	platform v1.Platform
	path     string
	sha256   string
}

// readBinaries finds the binary of each platform ("linux/amd64") in dist
// with its sum from dist/SHA256SUMS, and checks that the file still has it.
func readBinaries(dist string, platforms []string) ([]binary, error) {
	sums, err := readSums(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		return nil, err
	}
	var out []binary
	for _, p := range platforms {
		goos, arch, ok := strings.Cut(p, "/")
		if !ok || goos != "linux" {
			return nil, fmt.Errorf("platform %q: the image is for linux/ARCH platforms only", p)
		}
		file := fmt.Sprintf("%s-%s-%s", binaryName, goos, arch)
		want, ok := sums[file]
		if !ok {
			return nil, fmt.Errorf("%s/SHA256SUMS has no line for %s: build it first (PLATFORMS=%s make release)", dist, file, p)
		}
		got, err := fileSHA256(filepath.Join(dist, file))
		if err != nil {
			return nil, err
		}
		if got != want {
			return nil, fmt.Errorf("%s/%s has sha256 %s, SHA256SUMS says %s: dist/ is stale, run make image again", dist, file, got, want)
		}
		out = append(out, binary{platform: v1.Platform{OS: goos, Architecture: arch}, path: filepath.Join(dist, file), sha256: want})
	}
	return out, nil
}

// readSums reads a sha256sum file into file name → sum.
func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: make release writes it", err)
	}
	defer f.Close()
	sums := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		sum, file, ok := strings.Cut(s.Text(), "  ")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not a line of sha256sum", path, s.Text())
		}
		sums[file] = sum
	}
	return sums, s.Err()
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// labels are the image's OCI labels, in the config of every platform and
// as the index's annotations.
func (r release) labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.source":   r.source,
		"org.opencontainers.image.version":  r.version,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    binaryName,
		"org.opencontainers.image.created":  r.created.UTC().Format(time.RFC3339),
	}
	if r.revision != "" {
		l["org.opencontainers.image.revision"] = r.revision
	}
	return l
}

// index builds the image: one manifest per binary, in the order given.
func (r release) index() (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, b := range r.binaries {
		img, err := r.image(b)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", b.platform.OS, b.platform.Architecture, err)
		}
		p := b.platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, r.labels()).(v1.ImageIndex), nil
}

// image is one platform's image: FROM scratch, one layer with the binary.
func (r release) image(b binary) (v1.Image, error) {
	layer, err := r.layer(b)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: r.created}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created:   created,
		CreatedBy: "hack/image: " + binaryPath + " from " + filepath.Base(b.path),
		Comment:   "sha256 " + b.sha256,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = b.platform.OS, b.platform.Architecture
	cf.Created = created
	cf.Config = v1.Config{
		Entrypoint: []string{binaryPath},
		User:       user,
		Labels:     r.labels(),
	}
	return mutate.ConfigFile(img, cf)
}

// layers are the layers made in this process, by binary and created
// time: each is compressed once (the check and the tests build several
// indexes of the same binaries).
var layers sync.Map

// layer is the gzipped layer of b's binary.
func (r release) layer(b binary) (v1.Layer, error) {
	key := fmt.Sprintf("%s %s %d", b.path, b.sha256, r.created.Unix())
	if l, ok := layers.Load(key); ok {
		return l.(v1.Layer), nil
	}
	data, err := os.ReadFile(b.path)
	if err != nil {
		return nil, err
	}
	layerTar, err := r.layerTar(data)
	if err != nil {
		return nil, err
	}
	// gzip's default level: 14.7 MB of 46 (level 9: 14.5 MB, three times the time).
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	layers.Store(key, l)
	return l, nil
}

// layerTar is the layer's uncompressed tar: the binary alone at
// binaryPath, owned by root, executable by every user, dated created.
func (r release) layerTar(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(binaryPath, "/"),
		Mode:     0o755,
		Size:     int64(len(data)),
		ModTime:  r.created,
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayout writes idx as the only entry of a new OCI image layout in
// dir (whatever dir held is removed), named by ref.name = version, the
// form `crane push DIR REF` and `skopeo copy oci:DIR:VERSION` read.
func writeLayout(dir string, idx v1.ImageIndex, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version}))
}
