// Command licenses lists the license of every module linked into the
// plugin's binary (go list -deps of the main package, for each platform of
// hack/release.sh), read from each module's LICENSE, LICENCE or COPYING file
// and told by its text (classify.go), and fails naming each module whose
// license is missing, unknown or not allowed. make licenses runs it; it uses
// nothing but the standard library, in a module of its own.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
)

func main() {
	root := flag.String("root", "../..", "the plugin's module")
	allow := flag.String("allow", "Apache-2.0,MIT,BSD-2-Clause,BSD-3-Clause,ISC,MPL-2.0", "the licenses a linked module may have, separated by commas")
	verbose := flag.Bool("v", false, "list every module with its license")
	flag.Parse()
	mods, err := linkedModules(*root, []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "licenses:", err)
		os.Exit(1)
	}
	if !report(os.Stdout, os.Stderr, mods, strings.Split(*allow, ","), *verbose) {
		os.Exit(1)
	}
}

// module is one module linked into the binary.
type module struct {
	path, version, dir string
}

// linkedModules is every module whose packages the main package of root
// imports, directly or not, on any of the platforms, sorted by path; the
// main module is among them. Tests and the standard library are not.
func linkedModules(root string, platforms []string) ([]module, error) {
	seen := map[string]module{}
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}\t{{.Version}}\t{{.Dir}}{{end}}", ".")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -deps for %s in %s: %v: %s", p, root, err, stderr.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(line, "\t")
			if len(f) != 3 {
				continue // a package of the standard library
			}
			if f[2] == "" {
				return nil, fmt.Errorf("module %s %s is not in the module cache: run go mod download in %s", f[0], f[1], root)
			}
			seen[f[0]] = module{path: f[0], version: f[1], dir: f[2]}
		}
	}
	return slices.SortedFunc(maps.Values(seen), func(a, b module) int { return strings.Compare(a.path, b.path) }), nil
}

// report prints the number of modules of each license, each module with
// -v, and every problem; it says whether there was none.
func report(out, errOut io.Writer, mods []module, allowed []string, verbose bool) bool {
	count := map[string]int{}
	var problems []string
	for _, m := range mods {
		id, problem := licenseOf(m, allowed)
		if problem != "" {
			problems = append(problems, problem)
			continue
		}
		count[id]++
		if verbose {
			fmt.Fprintf(out, "%-50s %-36s %s\n", m.path, m.version, id)
		}
	}
	fmt.Fprintf(out, "licenses of the %d modules linked into the plugin:\n", len(mods))
	for _, id := range slices.Sorted(maps.Keys(count)) {
		fmt.Fprintf(out, "  %-36s %3d\n", id, count[id])
	}
	for _, p := range problems {
		fmt.Fprintln(errOut, "licenses:", p)
	}
	return len(problems) == 0
}

// licenseOf is the module's license (an SPDX expression: "MIT", or
// "Apache-2.0 AND MIT" where its files name both), or what is wrong with it.
func licenseOf(m module, allowed []string) (string, string) {
	name := strings.TrimSpace(m.path + " " + m.version)
	files, err := moduleLicense(m.dir)
	if err != nil {
		return "", fmt.Sprintf("%s: %v", name, err)
	}
	if len(files) == 0 {
		return "", fmt.Sprintf("%s has no LICENSE, LICENCE or COPYING file in %s: find its license before linking it", name, m.dir)
	}
	var ids []string
	for _, file := range slices.Sorted(maps.Keys(files)) {
		if len(files[file]) == 0 {
			return "", fmt.Sprintf("%s: %s/%s is a license this check does not know: read it, and add its signature to hack/licenses/classify.go if it may be linked", name, m.dir, file)
		}
		ids = append(ids, files[file]...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, id := range ids {
		if !slices.Contains(allowed, id) {
			return "", fmt.Sprintf("%s is licensed %s, which is not allowed (-allow %s): replace the module, or have its license reviewed", name, id, strings.Join(allowed, ","))
		}
	}
	return strings.Join(ids, " AND "), ""
}
