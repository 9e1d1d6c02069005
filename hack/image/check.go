package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// elfMachine is the ELF machine of each architecture the image is built
// for: a binary of another one in a platform's manifest is refused even if
// SHA256SUMS were wrong too.
var elfMachine = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// platformImage is what the check found of one platform in the layout.
type platformImage struct {
	platform       v1.Platform
	manifestDigest v1.Hash
	binary         []byte
}

// checkLayout reads the OCI layout in dir back and checks that its one
// index holds exactly the release's platforms, each with its binary (same
// sha256 as SHA256SUMS, an ELF of its architecture) at binaryPath as its
// only file, and a config naming its platform, user, entrypoint and
// version. It returns the index's digest and each platform's image.
func checkLayout(dir string, r release) (v1.Hash, []platformImage, error) {
	idx, err := layoutIndex(dir)
	if err != nil {
		return v1.Hash{}, nil, err
	}
	indexDigest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return v1.Hash{}, nil, err
	}
	var got, want []string
	for _, d := range m.Manifests {
		if d.Platform != nil {
			got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		}
	}
	for _, b := range r.binaries {
		want = append(want, b.platform.OS+"/"+b.platform.Architecture)
	}
	if !slices.Equal(got, want) || len(m.Manifests) != len(want) {
		return v1.Hash{}, nil, fmt.Errorf("%s: the index has the platforms %v (%d manifests), want %v", dir, got, len(m.Manifests), want)
	}
	if v := m.Annotations["org.opencontainers.image.version"]; v != r.version {
		return v1.Hash{}, nil, fmt.Errorf("%s: the index's version annotation is %q, want %q", dir, v, r.version)
	}
	var out []platformImage
	for i, d := range m.Manifests {
		b := r.binaries[i]
		name := b.platform.OS + "/" + b.platform.Architecture
		img, err := idx.Image(d.Digest)
		if err != nil {
			return v1.Hash{}, nil, fmt.Errorf("%s: %w", name, err)
		}
		data, err := checkImage(img, b, r.version)
		if err != nil {
			return v1.Hash{}, nil, fmt.Errorf("%s image %s: %w", name, d.Digest, err)
		}
		out = append(out, platformImage{platform: b.platform, manifestDigest: d.Digest, binary: data})
	}
	return indexDigest, out, nil
}

// layoutIndex is the image index the layout's index.json names (its one
// entry).
func layoutIndex(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI image layout: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s/index.json must name one image index, it names %d entries", dir, len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}

// checkImage checks one platform's image against its binary and returns
// the binary as the image holds it.
func checkImage(img v1.Image, b binary, version string) ([]byte, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	var problems []string
	if cf.OS != b.platform.OS || cf.Architecture != b.platform.Architecture {
		problems = append(problems, fmt.Sprintf("the config says %s/%s", cf.OS, cf.Architecture))
	}
	if cf.Config.User != user {
		problems = append(problems, fmt.Sprintf("user %q, want %q", cf.Config.User, user))
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{binaryPath}) {
		problems = append(problems, fmt.Sprintf("entrypoint %q, want [%s]", cf.Config.Entrypoint, binaryPath))
	}
	if v := cf.Config.Labels["org.opencontainers.image.version"]; v != version {
		problems = append(problems, fmt.Sprintf("version label %q, want %q", v, version))
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%d layers, want 1 (the binary)", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := onlyFile(rc, strings.TrimPrefix(binaryPath, "/"))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != b.sha256 {
		return nil, fmt.Errorf("%s has sha256 %s; SHA256SUMS says %s for %s", binaryPath, got, b.sha256, filepath.Base(b.path))
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s is not an ELF binary: %w", binaryPath, err)
	}
	if want, ok := elfMachine[b.platform.Architecture]; !ok || f.Machine != want {
		return nil, fmt.Errorf("%s is a binary for %s, not %s", binaryPath, f.Machine, b.platform.Architecture)
	}
	return data, nil
}

// onlyFile reads a layer's tar and returns the content of name, its only
// entry, an executable regular file.
func onlyFile(r io.Reader, name string) ([]byte, error) {
	tr := tar.NewReader(r)
	var data []byte
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		names = append(names, hdr.Name)
		if hdr.Name == name && hdr.Typeflag == tar.TypeReg && hdr.Mode&0o111 == 0o111 {
			if data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
	}
	if data == nil || len(names) != 1 {
		return nil, fmt.Errorf("the layer holds %q; want only %s, executable by everyone", names, name)
	}
	return data, nil
}

// runHostBinary runs the image's binary of this machine's platform, if the
// image has one: `-version` must print the version, and `copy` must write a
// copy with the same sha256. It says what it ran, or why it ran nothing.
func runHostBinary(images []platformImage, version string) (string, error) {
	i := slices.IndexFunc(images, func(p platformImage) bool {
		return p.platform.OS == runtime.GOOS && p.platform.Architecture == runtime.GOARCH
	})
	if i < 0 {
		return fmt.Sprintf("no image for %s/%s, this machine: its binary not run", runtime.GOOS, runtime.GOARCH), nil
	}
	dir, err := os.MkdirTemp("", "image-check-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	exe := filepath.Join(dir, binaryName)
	if err := os.WriteFile(exe, images[i].binary, 0o755); err != nil {
		return "", err
	}
	out, err := exec.Command(exe, "-version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("the image's %s -version: %w: %s", binaryPath, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != version {
		return "", fmt.Errorf("the image's %s -version prints %q, want %q", binaryPath, got, version)
	}
	if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
		return "", err
	}
	dest := filepath.Join(dir, "plugins", binaryName)
	out, err = exec.Command(exe, "copy", dest).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("the image's %s copy %s: %w: %s", binaryPath, dest, err, out)
	}
	sum := sha256.Sum256(images[i].binary)
	want := hex.EncodeToString(sum[:])
	if got, err := fileSHA256(dest); err != nil || got != want {
		return "", fmt.Errorf("the image's %s copy wrote %s with sha256 %s (%v), want %s", binaryPath, dest, got, err, want)
	}
	if !strings.Contains(string(out), want) {
		return "", fmt.Errorf("the image's %s copy printed %q, which does not name its sha256 %s", binaryPath, out, want)
	}
	return fmt.Sprintf("ran the %s/%s binary: -version prints %s; copy wrote the same sha256", runtime.GOOS, runtime.GOARCH, version), nil
}
