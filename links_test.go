package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// markdownLink is the target of an inline link or image: ](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// inlineCode is a code span, whose text is not a link.
var inlineCode = regexp.MustCompile("`[^`]*`")

// Every relative link of the pages at the top (README, CHANGELOG) and under
// docs/ names a file or folder of the repository, and a link with a
// #fragment names a heading of its page (as GitHub makes anchors of
// headings), so a page can move or a section be renamed only with its
// links.
func TestDocsLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir("docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		anchors[page] = headingAnchors(string(data))
		return anchors[page]
	}
	checked := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range links(string(data)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, fragment, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: no such file or folder %s", page, target, dest)
					continue
				}
			}
			if fragment != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[fragment] {
				t.Errorf("%s: link %s: %s has no heading with anchor #%s", page, target, dest, fragment)
			}
		}
	}
	if checked < 100 {
		t.Errorf("checked %d links; the pattern no longer finds them", checked)
	}
	t.Logf("%d relative links in %d pages resolve", checked, len(pages))
}

// links are the link targets of a page, outside code.
func links(md string) []string {
	var out []string
	for _, line := range proseLines(md) {
		for _, m := range markdownLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// proseLines are the lines of a page outside fenced code blocks.
func proseLines(md string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives a page's headings: lower
// case, spaces as hyphens, other punctuation dropped, -1, -2 … after a
// repeated one.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(md) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
