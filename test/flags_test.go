package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// docs/install.md's flag table is the binary's: every flag the binary has is a
// row, with the default it prints in -h, and no row names a flag it does not
// have.
func TestTheFlagTableIsTheBinarysFlags(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(pluginBin, "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -h: %v\n%s", pluginBin, err, out)
	}
	binary := helpFlags(string(out))
	page, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedFlags(string(page))
	if len(binary) == 0 || len(documented) == 0 {
		t.Fatalf("read %d flags from -h and %d from docs/install.md's table", len(binary), len(documented))
	}
	for name, def := range binary {
		doc, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("-%s (default %q) has no row in docs/install.md's flag table", name, def)
		case !sameDefault(def, doc):
			t.Errorf("-%s: docs/install.md says the default is %q, the binary's -h says %q", name, doc, def)
		}
	}
	for name := range documented {
		if _, ok := binary[name]; !ok {
			t.Errorf("docs/install.md's flag table has -%s, which the binary does not have", name)
		}
	}
	t.Logf("%d flags, each in docs/install.md with its default", len(binary))
}

var helpDefault = regexp.MustCompile(`\(default "?(.*?)"?\)$`)

// helpFlags reads flag.PrintDefaults' output: each flag and the default it
// prints ("" where it prints none, as for a zero value).
func helpFlags(help string) map[string]string {
	flags := map[string]string{}
	var name string
	for _, line := range strings.Split(help, "\n") {
		if f, ok := strings.CutPrefix(line, "  -"); ok {
			name = strings.Fields(f)[0]
			flags[name] = ""
			continue
		}
		if m := helpDefault.FindStringSubmatch(strings.TrimSpace(line)); m != nil && name != "" {
			flags[name] = m[1]
		}
	}
	return flags
}

var flagRow = regexp.MustCompile("^\\| `-([a-zA-Z-]+)` \\| *(`[^`]*`)? *\\|")

// documentedFlags reads the rows of docs/install.md's "### Flags" table.
func documentedFlags(page string) map[string]string {
	_, table, _ := strings.Cut(page, "### Flags\n")
	table, _, _ = strings.Cut(table, "\n\n")
	flags := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		if m := flagRow.FindStringSubmatch(line); m != nil {
			flags[m[1]] = strings.Trim(m[2], "`")
		}
	}
	return flags
}

// sameDefault compares a default as -h prints it with docs/install.md's: durations
// by value (1m0s is 1m), and a zero value, which -h does not print, as empty
// or false.
func sameDefault(help, doc string) bool {
	if help == doc {
		return true
	}
	if help == "" {
		return slices.Contains([]string{"", "false", "0"}, doc)
	}
	h, errH := time.ParseDuration(help)
	r, errR := time.ParseDuration(doc)
	return errH == nil && errR == nil && h == r
}
