package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

const copyUsage = `usage: rollouts-gatewayapi-ssa copy DEST

Copies this binary to the file DEST and prints its sha256 and DEST, as
sha256sum does. It is how the plugin's image, which holds nothing but the
binary, installs the plugin from an initContainer into a volume the Argo
Rollouts controller mounts (docs/image.md). DEST's directory must exist and be
writable; the copy is written beside DEST, synced and renamed into place, so a
reader never sees half a binary. DEST is replaced if it exists.
`

func runCopy(args []string, out, errOut io.Writer) int {
	fset := flag.NewFlagSet("copy", flag.ContinueOnError)
	fset.SetOutput(errOut)
	fset.Usage = func() { fmt.Fprint(errOut, copyUsage) }
	if err := fset.Parse(args); err != nil || fset.NArg() != 1 {
		if err == nil {
			fset.Usage()
		}
		return 2
	}
	src, err := os.Executable()
	if err != nil {
		fmt.Fprintf(errOut, "copy: cannot find this binary's own file: %v\n", err)
		return 1
	}
	dest := fset.Arg(0)
	sum, err := copyExecutable(src, dest)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	fmt.Fprintf(out, "%s  %s\n", sum, dest)
	return 0
}

// copyExecutable copies the file src to dest, executable by everyone,
// atomically: a temporary file in dest's directory, synced, then renamed
// over dest. It returns the copy's sha256.
func copyExecutable(src, dest string) (sum string, err error) {
	dir := filepath.Dir(dest)
	switch info, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("copy: the directory %s does not exist: mount the volume the controller reads the plugin from there, or give a DEST in an existing directory", dir)
	case err != nil:
		return "", fmt.Errorf("copy: %w", err)
	case !info.IsDir():
		return "", fmt.Errorf("copy: %s is not a directory; DEST must be a file in a directory", dir)
	}
	if info, err := os.Stat(dest); err == nil && info.IsDir() {
		return "", fmt.Errorf("copy: %s is a directory; give the path of the file to write, such as %s", dest, filepath.Join(dest, "rollouts-gatewayapi-ssa"))
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("copy: reading this binary: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dest)+".*")
	if err != nil {
		return "", fmt.Errorf("copy: cannot write in %s: %w; the directory must be writable by the container's user (the image runs as 65532)", dir, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), in); err != nil {
		return "", fmt.Errorf("copy: writing %s: %w", tmp.Name(), err)
	}
	// Synced before the rename: the controller may start as soon as the
	// initContainer exits, and must find the whole file.
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("copy: writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		return "", fmt.Errorf("copy: making %s executable: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("copy: writing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return "", fmt.Errorf("copy: %w", err)
	}
	syncDir(dir)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// syncDir makes the rename durable where the file system can; where it
// cannot (some return EINVAL for a directory), the copy is still whole.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
