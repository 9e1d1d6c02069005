package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// signature tells a license by phrases of its text: all of all must be
// there, and one of any if any is given. Phrases are written normalised
// (lower case, words separated by one space, no punctuation).
type signature struct {
	id       string
	all, any []string
	// unless: a text with one of these phrases is not this license
	// (BSD-2-Clause's text is part of BSD-3-Clause's).
	unless []string
}

const (
	bsdGrant   = "redistribution and use in source and binary forms with or without modification are permitted provided that the following conditions are met"
	bsdEndorse = "used to endorse or promote products derived from this software"
)

var signatures = []signature{
	{id: "Apache-2.0", all: []string{"apache license", "version 2 0"},
		any: []string{"terms and conditions for use reproduction and distribution", "licensed under the apache license version 2 0"}},
	{id: "MIT", all: []string{
		"permission is hereby granted free of charge to any person obtaining a copy of this software",
		"the above copyright notice and this permission notice shall be included in all copies or substantial portions of the software",
	}},
	{id: "ISC", any: []string{
		"permission to use copy modify and or distribute this software for any purpose with or without fee is hereby granted",
		"permission to use copy modify and distribute this software for any purpose with or without fee is hereby granted",
	}},
	{id: "BSD-4-Clause", all: []string{bsdGrant, "all advertising materials mentioning features or use of this software"}},
	// The third clause: no endorsement by the names of the authors ("neither
	// the name of … nor …", or "the names of its contributors may not be …").
	{id: "BSD-3-Clause", all: []string{bsdGrant}, any: []string{bsdEndorse},
		unless: []string{"all advertising materials mentioning features or use of this software"}},
	{id: "BSD-2-Clause", all: []string{bsdGrant},
		unless: []string{bsdEndorse, "all advertising materials mentioning features or use of this software"}},
	{id: "MPL-2.0", all: []string{"mozilla public license version 2 0"}},
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// normalise is text in lower case with every run of anything but letters
// and digits as one space: line breaks, comment markers and punctuation do
// not change what a text says.
func normalise(text string) string {
	return " " + strings.TrimSpace(nonWord.ReplaceAllString(strings.ToLower(text), " ")) + " "
}

// classify is every license whose signature the text has, sorted; none for
// a text it does not know.
func classify(text string) []string {
	t := normalise(text)
	has := func(p string) bool { return strings.Contains(t, " "+p+" ") }
	var ids []string
	for _, s := range signatures {
		if !allOf(s.all, has) || (len(s.any) > 0 && !slices.ContainsFunc(s.any, has)) || slices.ContainsFunc(s.unless, has) {
			continue
		}
		ids = append(ids, s.id)
	}
	slices.Sort(ids)
	return ids
}

func allOf(phrases []string, has func(string) bool) bool {
	for _, p := range phrases {
		if !has(p) {
			return false
		}
	}
	return true
}

// licenseFile matches the names a module's license goes by at its root:
// LICENSE, LICENCE, COPYING, with an extension or a suffix (LICENSE.md,
// LICENSE-APACHE).
var licenseFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying)([-_.].*)?$`)

// moduleLicense reads the license files at the root of a module's folder
// and returns them, with what each is classified as (nil when unknown).
func moduleLicense(dir string) (map[string][]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	found := map[string][]string{}
	for _, e := range entries {
		if e.IsDir() || !licenseFile.MatchString(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		found[e.Name()] = classify(string(data))
	}
	return found, nil
}
