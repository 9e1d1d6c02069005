package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// shellPages are the pages a reader follows command by command.
var shellPages = []string{
	filepath.Join("docs", "quickstart-gke-fleet.md"),
	filepath.Join("docs", "migration.md"),
	filepath.Join("docs", "operations.md"),
	filepath.Join("docs", "image.md"),
}

// The commands of the pages a reader copies into a shell run as written,
// as far as a test can tell without the clusters (test/docs_test.go applies
// their YAML): every ```sh, ```bash and ```shell block passes bash -n; no
// line of those blocks holds a <placeholder> (bash reads "<region>" as a
// redirection) except in a comment or quoted in a variable's assignment;
// and no line of the page, prose included, puts flags between kubectl and
// a kubectl plugin ("kubectl --context x argo rollouts …" fails: flags
// cannot be placed before plugin name). DOCS_SHELL_PAGE=<file> checks
// another page instead, such as an older copy.
func TestDocsShellBlocks(t *testing.T) {
	pages := shellPages
	if p := os.Getenv("DOCS_SHELL_PAGE"); p != "" {
		pages = []string{p}
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks, problems := shellProblems(t, string(data))
		for _, p := range problems {
			t.Errorf("%s: %s", page, p)
		}
		t.Logf("%s: %d shell blocks", page, blocks)
	}
}

// The checks find what they should, and only that.
func TestDocsShellBlocksCatch(t *testing.T) {
	for _, c := range []struct {
		md   string
		want []string
	}{
		{"```sh\nkubectl --context a argo rollouts get rollout x\n```\n", []string{"kubectl plugin"}},
		{"Run `kubectl -n x argo rollouts promote r`.\n", []string{"kubectl plugin"}},
		{"```sh\nkubectl argo rollouts --context a get rollout x\nkubectl --context a get pods\n```\n", nil},
		{"```sh\ngcloud container clusters describe fleet --location <region>\n```\n", []string{"placeholder", "bash -n"}},
		{"```bash\nREGION='<region>'   # yours\necho \"$REGION\" # <not a command>\n```\n", nil},
		{"```shell\nfor i in 1 2; do echo $i\n```\n", []string{"bash -n"}},
		{"```text\n$ kubectl get <kind>\n```\n```yaml\nk: <v>\n```\n", nil},
	} {
		_, problems := shellProblems(t, c.md)
		got := strings.Join(problems, "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: problems %q, want one about %s", c.md, problems, w)
			}
		}
		if len(c.want) == 0 && len(problems) > 0 {
			t.Errorf("%q: problems %q, want none", c.md, problems)
		}
	}
}

var (
	// pluginAfterFlags is kubectl with a flag before a plugin's name.
	pluginAfterFlags = regexp.MustCompile(`\bkubectl\s+-[^|;&]*?\s(argo\s+rollouts)\b`)
	placeholder      = regexp.MustCompile(`<[A-Za-z][^<>]*>`)
	// quotedAssignment is NAME='<…>' or NAME="<…>", a placeholder the
	// reader replaces in one place.
	quotedAssignment = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*=(['"])<[^<>]*>['"]`)
	shellFence       = regexp.MustCompile("^```(sh|bash|shell)\\s*$")
)

// shellProblems checks a page: its shell blocks (how many) and what is
// wrong with its commands.
func shellProblems(t *testing.T, md string) (int, []string) {
	t.Helper()
	var problems []string
	var block *strings.Builder
	blocks, start := 0, 0
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		n := i + 1
		if m := pluginAfterFlags.FindString(line); m != "" {
			problems = append(problems, fmt.Sprintf("line %d: %q: give kubectl's flags after the kubectl plugin's name (kubectl argo rollouts --context …)", n, m))
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case block == nil && !fenced && shellFence.MatchString(trimmed):
			block, start = &strings.Builder{}, n
			continue
		case block == nil && strings.HasPrefix(trimmed, "```"):
			fenced = !fenced
			continue
		case block != nil && trimmed == "```":
			blocks++
			if out, err := bashN(t, block.String()); err != nil {
				problems = append(problems, fmt.Sprintf("the shell block at line %d: bash -n: %s", start, out))
			}
			block = nil
			continue
		case block == nil:
			continue
		}
		block.WriteString(line + "\n")
		code := shellComment(line)
		if placeholder.MatchString(code) && !quotedAssignment.MatchString(code) {
			problems = append(problems, fmt.Sprintf("line %d: placeholder %s in a command: set a variable at the top (NAME=value) and use \"$NAME\"", n, placeholder.FindString(code)))
		}
	}
	return blocks, problems
}

// shellComment is the line without its comment: from a # at its start or
// after a blank, outside quotes.
func shellComment(line string) string {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return line[:i]
		}
		prev = r
	}
	return line
}

// bashN runs bash -n on a script: its syntax, nothing run.
func bashN(t *testing.T, script string) (string, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "block.sh")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-n", f).CombinedOutput()
	return strings.TrimSpace(strings.ReplaceAll(string(out), f+": ", "")), err
}
