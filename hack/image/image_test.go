package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

const (
	testVersion = "v0.0.0-image-test"
	testEpoch   = "1765000000" // 2025-12-06T05:46:40Z
)

// dist is the folder of one `make release` of the Linux binaries, made by
// TestMain with hack/release.sh as make image runs it: binaries, sums,
// image and IMAGE-DIGEST.
var dist string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "image-test-")
	if err != nil {
		panic(err)
	}
	dist = filepath.Join(dir, "dist")
	cmd := exec.Command("bash", "../release.sh")
	cmd.Env = append(os.Environ(), "DIST="+dist, "VERSION="+testVersion, "SOURCE_DATE_EPOCH="+testEpoch,
		"PLATFORMS=linux/amd64 linux/arm64", "PUSH=")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "hack/release.sh: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// make image as a user runs it, read back with nothing but the OCI layout:
// each platform's manifest holds one file, /rollouts-gatewayapi-ssa, whose
// sha256 is the line of SHA256SUMS for that platform's binary; its config
// names the platform, a non-root user and the binary as entrypoint; the
// binary of this machine's platform prints the version and installs itself
// with copy; IMAGE-DIGEST names the index the layout holds.
func TestTheImageHoldsTheReleasedBinaries(t *testing.T) {
	sums := sha256Sums(t, filepath.Join(dist, "SHA256SUMS"))
	idx, err := layoutIndex(filepath.Join(dist, "image"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		p := d.Platform.OS + "/" + d.Platform.Architecture
		platforms = append(platforms, p)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		files := filesOf(t, img)
		if len(files) != 1 {
			t.Errorf("%s: the image holds %d files, want only /rollouts-gatewayapi-ssa", p, len(files))
		}
		want := sums["rollouts-gatewayapi-ssa-"+d.Platform.OS+"-"+d.Platform.Architecture]
		if got := sha256Hex(files["rollouts-gatewayapi-ssa"]); got != want || want == "" {
			t.Errorf("%s: /rollouts-gatewayapi-ssa has sha256 %s; SHA256SUMS says %q", p, got, want)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cf.OS + "/" + cf.Architecture; got != p {
			t.Errorf("%s: the config says %s", p, got)
		}
		if cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != "/rollouts-gatewayapi-ssa" {
			t.Errorf("%s: user %q, entrypoint %q; want 65532:65532 and [/rollouts-gatewayapi-ssa]", p, cf.Config.User, cf.Config.Entrypoint)
		}
		for k, v := range map[string]string{"org.opencontainers.image.version": testVersion, "org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.source": "https://github.com/gatewayapi-ssa/rollouts-plugin"} {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s: label %s is %q, want %q", p, k, cf.Config.Labels[k], v)
			}
		}
		if got := cf.Created.UTC().Unix(); fmt.Sprint(got) != testEpoch {
			t.Errorf("%s: created %v, want SOURCE_DATE_EPOCH %s", p, cf.Created, testEpoch)
		}
		if d.Platform.OS == runtime.GOOS && d.Platform.Architecture == runtime.GOARCH {
			runAsTheInitContainerWould(t, files["rollouts-gatewayapi-ssa"])
		}
	}
	if got := strings.Join(platforms, " "); got != "linux/amd64 linux/arm64" {
		t.Errorf("the index's platforms are %s, want linux/amd64 linux/arm64", got)
	}
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref := firstLine(t, filepath.Join(dist, "IMAGE-DIGEST"))
	if want := "ghcr.io/gatewayapi-ssa/rollouts-plugin:" + testVersion + "@" + digest.String(); ref != want {
		t.Errorf("IMAGE-DIGEST names %s; the layout's index is %s", ref, want)
	}
}

// runAsTheInitContainerWould runs the image's binary: -version, then copy
// into a folder as install/'s initContainer does.
func runAsTheInitContainerWould(t *testing.T, binary []byte) {
	t.Helper()
	dir := t.TempDir()
	exe := filepath.Join(dir, "rollouts-gatewayapi-ssa")
	if err := os.WriteFile(exe, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "-version").Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != testVersion {
		t.Errorf("the image's binary -version: %q, %v; want %s", got, err, testVersion)
	}
	if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "plugins", "rollouts-gatewayapi-ssa")
	out, err = exec.Command(exe, "copy", dest).CombinedOutput()
	copied, _ := os.ReadFile(dest)
	if err != nil || !bytes.Equal(copied, binary) || string(out) != sha256Hex(binary)+"  "+dest+"\n" {
		t.Errorf("the image's binary copy %s: %v, printed %q, wrote %d bytes (of %d)", dest, err, out, len(copied), len(binary))
	}
}

// The same binaries, version and created time give the same image, byte
// for byte: writing it again from the release's dist/ gives the digests of
// IMAGE-DIGEST. Another created time gives another index (the time is what
// SOURCE_DATE_EPOCH pins).
func TestTheSameReleaseGivesTheSameDigest(t *testing.T) {
	again := t.TempDir()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-dist", dist, "-out", filepath.Join(again, "image"), "-digest-file", filepath.Join(again, "IMAGE-DIGEST"),
		"-version", testVersion, "-created", testEpoch, "-revision", strings.TrimSpace(string(head))}
	if err := run(args, io.Discard); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(dist, "IMAGE-DIGEST"))
	second, _ := os.ReadFile(filepath.Join(again, "IMAGE-DIGEST"))
	if len(first) == 0 || !bytes.Equal(first, second) {
		t.Errorf("the same release written twice:\n%s\nthen\n%s", first, second)
	}

	later := t.TempDir()
	args = []string{"-dist", dist, "-out", filepath.Join(later, "image"), "-digest-file", filepath.Join(later, "IMAGE-DIGEST"),
		"-version", testVersion, "-created", "1765000001", "-platforms", "linux/amd64"}
	if err := run(args, io.Discard); err != nil {
		t.Fatal(err)
	}
	third := firstLine(t, filepath.Join(later, "IMAGE-DIGEST"))
	if strings.SplitN(string(first), "\n", 2)[0] == third {
		t.Errorf("a second later and one platform fewer, the index is still %s", third)
	}
}

// The check after writing refuses an image that is not the release: a
// platform that holds another platform's binary, a config that runs as
// root, a platform missing, a binary not in SHA256SUMS.
func TestTheCheckRefusesAnImageThatIsNotTheRelease(t *testing.T) {
	r := testRelease(t, "linux/amd64", "linux/arm64")
	swapped := testRelease(t, "linux/amd64", "linux/arm64")
	// The arm64 manifest built from the amd64 binary, and SHA256SUMS made
	// to agree: only the binary's architecture tells.
	swapped.binaries[1].path, swapped.binaries[1].sha256 = r.binaries[0].path, r.binaries[0].sha256
	for name, tc := range map[string]struct {
		write func(t *testing.T, dir string)
		want  release
		says  string
	}{
		"an arm64 manifest with the amd64 binary, both sums agreeing": {
			write: func(t *testing.T, dir string) { writeRelease(t, dir, swapped) },
			want:  swapped, says: "linux/arm64 image sha256:",
		},
		"... and the message says what the binary is": {
			write: func(t *testing.T, dir string) { writeRelease(t, dir, swapped) },
			want:  swapped, says: "is a binary for EM_X86_64, not arm64",
		},
		"an arm64 manifest with the amd64 binary, SHA256SUMS right": {
			write: func(t *testing.T, dir string) { writeRelease(t, dir, swapped) },
			want:  r, says: "SHA256SUMS says " + r.binaries[1].sha256,
		},
		"a config that runs as root": {
			write: func(t *testing.T, dir string) {
				idx, err := r.index()
				if err != nil {
					t.Fatal(err)
				}
				writeIndex(t, dir, withUser(t, idx, "0:0"))
			},
			want: r, says: `user "0:0", want "65532:65532"`,
		},
		"an index without arm64": {
			write: func(t *testing.T, dir string) { writeRelease(t, dir, testRelease(t, "linux/amd64")) },
			want:  r, says: "the index has the platforms [linux/amd64] (1 manifests), want [linux/amd64 linux/arm64]",
		},
		"another version": {
			write: func(t *testing.T, dir string) {
				other := testRelease(t, "linux/amd64", "linux/arm64")
				other.version = "v9.9.9"
				writeRelease(t, dir, other)
			},
			want: r, says: `version annotation is "v9.9.9", want "` + testVersion + `"`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "image")
			tc.write(t, dir)
			_, _, err := checkLayout(dir, tc.want)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("checkLayout: %v; want an error that says %q", err, tc.says)
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "image")
	writeRelease(t, dir, r)
	if _, _, err := checkLayout(dir, r); err != nil {
		t.Errorf("the release itself is refused: %v", err)
	}
}

// dist/ changed after make release (a binary rebuilt, SHA256SUMS not):
// no image is written from it.
func TestNoImageOfABinaryThatIsNotInTheSums(t *testing.T) {
	stale := t.TempDir()
	for _, f := range []string{"SHA256SUMS", "rollouts-gatewayapi-ssa-linux-amd64"} {
		data, err := os.ReadFile(filepath.Join(dist, f))
		if err != nil {
			t.Fatal(err)
		}
		if f != "SHA256SUMS" {
			data = append(data, 0)
		}
		if err := os.WriteFile(filepath.Join(stale, f), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err := run([]string{"-dist", stale, "-version", testVersion, "-platforms", "linux/amd64"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "dist/ is stale") {
		t.Errorf("an image from a binary that is not the one of SHA256SUMS: %v; want dist/ is stale", err)
	}
	if _, err := os.Stat(filepath.Join(stale, "image")); err == nil {
		t.Errorf("%s/image was written", stale)
	}
}

// The push path a user without Docker takes (-push, PUSH= of make image):
// the layout's index goes to a registry (go-containerregistry's, in the
// test) and the registry then serves the same index and the same layers.
func TestPushSendsTheIndexARegistryServes(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/platform/rollouts-plugin:" + testVersion
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials: the registry of the test asks for none
	out := t.TempDir()
	dir := filepath.Join(out, "image")
	var printed bytes.Buffer
	err := run([]string{"-dist", dist, "-out", dir, "-digest-file", filepath.Join(out, "IMAGE-DIGEST"),
		"-version", testVersion, "-created", testEpoch, "-push", ref}, &printed)
	if err != nil {
		t.Fatal(err)
	}
	var pushed string
	for _, line := range strings.Split(printed.String(), "\n") {
		if after, ok := strings.CutPrefix(line, "pushed "+ref+"@"); ok {
			pushed = after
		}
	}
	local, err := layoutIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := local.Digest()
	if pushed != want.String() {
		t.Errorf("push says %s; the layout's index is %s", pushed, want)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	served, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := served.Digest(); got != want {
		t.Errorf("the registry serves %s as %s, want %s", ref, got, want)
	}
	m, _ := local.IndexManifest()
	for _, d := range m.Manifests {
		img, err := served.Image(d.Digest)
		if err != nil {
			t.Fatalf("%s/%s: %v", d.Platform.OS, d.Platform.Architecture, err)
		}
		files := filesOf(t, img)
		wantSum := sha256Sums(t, filepath.Join(dist, "SHA256SUMS"))["rollouts-gatewayapi-ssa-"+d.Platform.OS+"-"+d.Platform.Architecture]
		if got := sha256Hex(files["rollouts-gatewayapi-ssa"]); got != wantSum {
			t.Errorf("%s/%s pulled back: /rollouts-gatewayapi-ssa has sha256 %s, want %s", d.Platform.OS, d.Platform.Architecture, got, wantSum)
		}
	}
}

// testRelease is the release of TestMain's dist/ for the platforms given.
func testRelease(t *testing.T, platforms ...string) release {
	t.Helper()
	bins, err := readBinaries(dist, platforms)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parse([]string{"-version", testVersion, "-created", testEpoch})
	if err != nil {
		t.Fatal(err)
	}
	o.r.binaries = bins
	return o.r
}

func writeRelease(t *testing.T, dir string, r release) {
	t.Helper()
	idx, err := r.index()
	if err != nil {
		t.Fatal(err)
	}
	writeIndex(t, dir, idx)
}

func writeIndex(t *testing.T, dir string, idx v1.ImageIndex) {
	t.Helper()
	if err := writeLayout(dir, idx, testVersion); err != nil {
		t.Fatal(err)
	}
}

// withUser is idx with every image's config user set to u.
func withUser(t *testing.T, idx v1.ImageIndex, u string) v1.ImageIndex {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var adds []mutate.IndexAddendum
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		c.User = u
		if img, err = mutate.Config(img, c); err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: d.Platform}})
	}
	out := mutate.IndexMediaType(mutate.RemoveManifests(idx, func(v1.Descriptor) bool { return true }), m.MediaType)
	return mutate.AppendManifests(out, adds...)
}

// filesOf is every regular file of img's filesystem, by path.
func filesOf(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string][]byte{}
	tr := newTarReader(rc)
	for {
		name, data, err := tr()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
}

func sha256Sums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 2 {
			sums[fields[1]] = fields[0]
		}
	}
	return sums
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func firstLine(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitN(string(data), "\n", 2)[0]
}
