package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An initContainer of the plugin's image runs `copy /plugins/NAME`: the
// file it writes is this binary, byte for byte, executable, and what it
// prints is the copy's sha256 and path, as sha256sum prints them. A second
// copy (the pod restarted) replaces the first; no temporary file is left.
func TestCopyInstallsThisBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want := sha256Of(t, self)
	plugins := t.TempDir()
	dest := filepath.Join(plugins, "rollouts-gatewayapi-ssa")
	if err := os.WriteFile(dest, []byte("an older plugin"), 0o755); err != nil {
		t.Fatal(err)
	}

	for _, round := range []string{"over an older file", "again, over its own copy"} {
		code, out, errOut := runCLI(t, "copy", dest)
		if code != 0 || errOut != "" {
			t.Fatalf("copy %s: exit %d, stderr %q; want 0 and nothing", round, code, errOut)
		}
		if out != want+"  "+dest+"\n" {
			t.Errorf("copy %s printed %q; want %q", round, out, want+"  "+dest+"\n")
		}
		if got := sha256Of(t, dest); got != want {
			t.Errorf("copy %s: %s has sha256 %s; this binary's is %s", round, dest, got, want)
		}
		info, err := os.Stat(dest)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o755 {
			t.Errorf("copy %s: %s has mode %v; want -rwxr-xr-x", round, dest, info.Mode().Perm())
		}
		entries, _ := os.ReadDir(plugins)
		if len(entries) != 1 {
			t.Errorf("copy %s left %d files in %s, want only the plugin: %v", round, len(entries), plugins, entries)
		}
	}
}

// Where the copy cannot go, copy says so and exits 1 (2 for bad usage),
// writing nothing: the initContainer fails, and the pod's events show why,
// before the controller starts without its plugin.
func TestCopyRefusesWhereItCannotWrite(t *testing.T) {
	dir := t.TempDir()
	aFile := filepath.Join(dir, "a-file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		code int
		says string
	}{
		"into a directory that does not exist": {args: []string{filepath.Join(dir, "plugins", "rollouts-gatewayapi-ssa")}, code: 1,
			says: "the directory " + filepath.Join(dir, "plugins") + " does not exist: mount the volume"},
		"onto a directory": {args: []string{dir}, code: 1, says: "is a directory; give the path of the file to write"},
		"under a file":     {args: []string{filepath.Join(aFile, "rollouts-gatewayapi-ssa")}, code: 1, says: aFile + " is not a directory"},
		"without DEST":     {args: nil, code: 2, says: "usage: rollouts-gatewayapi-ssa copy DEST"},
		"with two DESTs":   {args: []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}, code: 2, says: "usage: rollouts-gatewayapi-ssa copy DEST"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"copy"}, tc.args...)...)
			if code != tc.code || out != "" || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, and a stderr that says %q", code, out, errOut, tc.code, tc.says)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the refused copies wrote in %s: %v", dir, entries)
	}
}

// A directory the container's user may not write in (not tested as root,
// who may write anywhere).
func TestCopyRefusesAReadOnlyDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes in any directory")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	code, _, errOut := runCLI(t, "copy", filepath.Join(dir, "rollouts-gatewayapi-ssa"))
	if code != 1 || !strings.Contains(errOut, "cannot write in "+dir) {
		t.Errorf("exit %d, stderr %q; want 1 and cannot write in %s", code, errOut, dir)
	}
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
