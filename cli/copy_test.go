package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// The image runs as 65532: copy, as that user, fills an emptyDir (a
// directory everyone may write in) and refuses a directory only root may
// write in, saying so. As root the test runs the copy as 65532 (this test
// binary again, TestCopyAsAnotherUser); as another user, as that user.
func TestCopyAsTheImagesUser(t *testing.T) {
	dir := t.TempDir()
	// Both t.TempDir's folder and the test's own: 65532 must reach the copy.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	emptyDir, rootOnly := filepath.Join(dir, "emptydir"), filepath.Join(dir, "root-only")
	for d, mode := range map[string]os.FileMode{emptyDir: 0o777, rootOnly: 0o555} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(d, 0o755)
	}
	copyAs := func(dest string) (int, string) {
		if os.Geteuid() != 0 {
			code, _, errOut := runCLI(t, "copy", dest)
			return code, errOut
		}
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(dir, "cli.test")
		if _, err := os.Stat(exe); err != nil {
			data, err := os.ReadFile(self)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(exe, data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(exe, "-test.run=^TestCopyAsAnotherUser$")
		cmd.Env = append(os.Environ(), "COPY_TEST_DEST="+dest)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err = cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stderr.String()
	}

	dest := filepath.Join(emptyDir, "rollouts-gatewayapi-ssa")
	if code, errOut := copyAs(dest); code != 0 {
		t.Errorf("copy into an emptyDir: exit %d, stderr %q; want 0", code, errOut)
	}
	if info, err := os.Stat(dest); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("copy into an emptyDir wrote %v (%v); want an executable file", info, err)
	}
	code, errOut := copyAs(filepath.Join(rootOnly, "rollouts-gatewayapi-ssa"))
	if code != 1 || !strings.Contains(errOut, "cannot write in "+rootOnly) || !strings.Contains(errOut, "must be writable by the container's user") {
		t.Errorf("copy into a directory only root may write in: exit %d, stderr %q; want 1 and cannot write in %s", code, errOut, rootOnly)
	}
}

// TestCopyAsAnotherUser is the copy TestCopyAsTheImagesUser runs as 65532;
// alone it does nothing.
func TestCopyAsAnotherUser(t *testing.T) {
	dest := os.Getenv("COPY_TEST_DEST")
	if dest == "" {
		return
	}
	os.Exit(Run([]string{"copy", dest}, os.Stdout, os.Stderr))
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
