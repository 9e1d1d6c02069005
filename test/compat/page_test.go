package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// namedErrors are the errors a user gets on an older Gateway API, as the
// page names them, each with the text its RpcError contains.
var namedErrors = []struct{ name, contains string }{
	{"no rule names", "needs rule names (spec.rules[].name)"},
	{"no mirror percentage", "requestMirror.percent"},
}

// errorName is the name of the error a plugin's error string is, "" for
// one the page does not name.
func errorName(s string) string {
	for _, e := range namedErrors {
		if strings.Contains(s, e.contains) {
			return e.name
		}
	}
	return ""
}

// isErrorName says whether v is the name of an error the page names.
func isErrorName(v string) bool {
	return slices.ContainsFunc(namedErrors, func(e struct{ name, contains string }) bool { return e.name == v })
}

// pagePath is the page whose table the matrix measures (docs/compatibility.md
// sums it up for users).
var pagePath = filepath.Join(harness.RepoRoot(), "docs", "performance", "compatibility-matrix.md")

var channels = []harness.Channel{harness.Standard, harness.Experimental}

// rowKey says which row of the table: a release's channel and a route kind.
type rowKey struct {
	release string
	channel harness.Channel
	kind    string
}

// channelOnly is the key without its kind: the release's channel.
func (k rowKey) channelOnly() rowKey {
	k.kind = ""
	return k
}

// row is one row of the table: the version of the kind the plugin uses,
// and a value (works, n/a or an error's name) per feature.
type row struct {
	rowKey
	version string
	cells   map[string]string
}

// table is the page's table, its rows by key.
type table map[rowKey]row

const tableHeader = "| release | channel | route |"

// page is the matrix page: the text before the table, the table, and
// the text after it.
type page struct {
	before, after string
	rows          table
}

func readPage() (page, error) {
	data, err := os.ReadFile(pagePath)
	if err != nil {
		return page{}, err
	}
	return parsePage(string(data))
}

var link = regexp.MustCompile(`^\[(.*)\]\(#[a-z0-9-]+\)$`)

// parsePage finds the table by its header, which must list the features in
// order; a cell may be a link to the error's section.
func parsePage(text string) (page, error) {
	lines := strings.SplitAfter(text, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, tableHeader) })
	if start < 0 {
		return page{}, fmt.Errorf("%s: no table starting %q", pagePath, tableHeader)
	}
	if got, want := strings.TrimSpace(lines[start]), strings.TrimSpace(strings.SplitAfter(header(), "\n")[0]); got != want {
		return page{}, fmt.Errorf("%s: the table's header is\n%s\nwant the matrix's features:\n%s", pagePath, got, want)
	}
	end := start + 2
	for end < len(lines) && strings.HasPrefix(lines[end], "|") {
		end++
	}
	p := page{before: strings.Join(lines[:start], ""), after: strings.Join(lines[end:], ""), rows: table{}}
	for i, line := range lines[start+2 : end] {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
			if m := link.FindStringSubmatch(cells[j]); m != nil {
				cells[j] = m[1]
			}
		}
		if len(cells) != 3+len(features) {
			return page{}, fmt.Errorf("%s line %d: %d cells, want %d: %s", pagePath, start+3+i, len(cells), 3+len(features), line)
		}
		kind, version, ok := strings.Cut(cells[2], " ")
		if !ok {
			return page{}, fmt.Errorf("%s line %d: the route is %q, want <kind> <version>", pagePath, start+3+i, cells[2])
		}
		r := row{rowKey: rowKey{cells[0], harness.Channel(cells[1]), kind}, version: version, cells: map[string]string{}}
		for j, f := range features {
			r.cells[f.name] = cells[3+j]
		}
		if _, dup := p.rows[r.rowKey]; dup {
			return page{}, fmt.Errorf("%s line %d: a second row for %s %s %s", pagePath, start+3+i, r.release, r.channel, r.kind)
		}
		p.rows[r.rowKey] = r
	}
	return p, nil
}

func header() string {
	var b strings.Builder
	b.WriteString(tableHeader)
	for _, f := range features {
		b.WriteString(" " + f.name + " |")
	}
	b.WriteString("\n|")
	for range 3 + len(features) {
		b.WriteString(" --- |")
	}
	return b.String() + "\n"
}

// render writes the table as the page holds it, rows in release, channel
// and kind order, an error's name as a link to its section.
func (t table) render() string {
	keys := make([]rowKey, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b rowKey) int {
		if d := slices.Index(harness.Releases, a.release) - slices.Index(harness.Releases, b.release); d != 0 {
			return d
		}
		if d := slices.Index(channels, a.channel) - slices.Index(channels, b.channel); d != 0 {
			return d
		}
		return slices.Index(kindOrder, a.kind) - slices.Index(kindOrder, b.kind)
	})
	var b strings.Builder
	b.WriteString(header())
	for _, k := range keys {
		r := t[k]
		fmt.Fprintf(&b, "| %s | %s | %s %s |", r.release, r.channel, r.kind, r.version)
		for _, f := range features {
			v := r.cells[f.name]
			if isErrorName(v) {
				v = fmt.Sprintf("[%s](#%s)", v, strings.ReplaceAll(v, " ", "-"))
			}
			b.WriteString(" " + v + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (p page) write() error {
	return os.WriteFile(pagePath, []byte(p.before+p.rows.render()+p.after), 0o644)
}

// The page's table holds only values a cell can measure, each named error
// has a section of its own that quotes the text the user's error contains,
// and the table reads back as it is written.
func TestThePageNamesEveryError(t *testing.T) {
	p, err := readPage()
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range p.rows {
		for f, v := range r.cells {
			if v != works && v != notApplicable && !isErrorName(v) {
				t.Errorf("%s %s %s %s: %q is neither %s, %s nor the name of an error", k.release, k.channel, k.kind, f, v, works, notApplicable)
			}
		}
	}
	for _, e := range namedErrors {
		_, section, ok := strings.Cut(p.after, "\n### "+e.name+"\n")
		if !ok {
			t.Errorf("no section \"### %s\" after the table", e.name)
			continue
		}
		section, _, _ = strings.Cut(section, "\n#")
		if !strings.Contains(section, "`"+e.contains+"`") {
			t.Errorf("section %q does not quote the text the error contains, `%s`", e.name, e.contains)
		}
	}
	again, err := parsePage(p.before + p.rows.render() + p.after)
	if err != nil {
		t.Fatal(err)
	}
	if p.rows.render() != again.rows.render() {
		t.Errorf("the table does not read back as it is written")
	}
}
