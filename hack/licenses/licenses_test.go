package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The plugin's own LICENSE, the Apache License 2.0 in full, is Apache-2.0.
func TestTheRepositorysLicenseIsApache(t *testing.T) {
	data, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if got := classify(string(data)); !slices.Equal(got, []string{"Apache-2.0"}) {
		t.Errorf("../../LICENSE is %v, want [Apache-2.0]", got)
	}
}

// A license is told by the clauses that make it that license, whatever its
// line breaks, case and punctuation; a text with none of them is unknown.
func TestEachLicenseIsToldByItsClauses(t *testing.T) {
	const (
		bsd = "Copyright (c) 2020 X. All rights reserved.\nRedistribution and use in source and binary forms, with or\nwithout modification, are permitted provided that the following conditions are met:\n" +
			"* Redistributions of source code must retain the above copyright notice.\n"
		mit = "Permission is hereby granted, free of charge, to any person obtaining a copy\n// of this software and associated documentation files ...\n" +
			"The above copyright notice and this permission notice shall be included in\nall copies or substantial portions of the Software.\n"
	)
	for name, tc := range map[string]struct {
		text string
		want []string
	}{
		"MIT, in a comment":                          {mit, []string{"MIT"}},
		"BSD with two clauses":                       {bsd, []string{"BSD-2-Clause"}},
		"BSD with neither the name":                  {bsd + "* Neither the name of X nor the names of its contributors may be used to endorse or promote products derived from this software.", []string{"BSD-3-Clause"}},
		"BSD whose third clause is names may not be": {bsd + "The names of its contributors may not be used to endorse or promote\nproducts derived from this software.", []string{"BSD-3-Clause"}},
		"BSD with the advertising clause":            {bsd + "3. All advertising materials mentioning features or use of this software must display ...", []string{"BSD-4-Clause"}},
		"ISC":                                        {"Permission to use, copy, modify, and/or distribute this software for any\npurpose with or without fee is hereby granted, provided that ...", []string{"ISC"}},
		"ISC, older wording":                         {"Permission to use, copy, modify, and distribute this software for any purpose with or without fee is hereby granted", []string{"ISC"}},
		"MPL-2.0":                                    {"Mozilla Public License, version 2.0\n\n1. Definitions", []string{"MPL-2.0"}},
		"Apache-2.0, as the header of a file":        {`Licensed under the Apache License, Version 2.0 (the "License");`, []string{"Apache-2.0"}},
		"MIT and Apache in one file":                 {mit + "\n\nLicensed under the Apache License, Version 2.0", []string{"Apache-2.0", "MIT"}},
		"the Apache License 1.1":                     {"The Apache Software License, Version 1.1", nil},
		"the GPL":                                    {"GNU GENERAL PUBLIC LICENSE Version 3, 29 June 2007", nil},
		"all rights reserved and nothing granted":    {"Copyright 2020 X. All rights reserved.", nil},
		"MIT's grant without its condition":          {"Permission is hereby granted, free of charge, to any person obtaining a copy of this software", nil},
	} {
		if got := classify(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%s: classified %v, want %v", name, got, tc.want)
		}
	}
}

// make licenses fails naming every module that may not be linked: no
// license file, a license the check does not know, one that is not allowed;
// the others are counted by license.
func TestEveryModuleWithoutAnAllowedLicenseIsNamed(t *testing.T) {
	mods := []module{
		fakeModule(t, "example.com/mit", map[string]string{"LICENSE": "Permission is hereby granted, free of charge, to any person obtaining a copy of this software ... The above copyright notice and this permission notice shall be included in all copies or substantial portions of the Software."}),
		fakeModule(t, "example.com/apache-and-mit", map[string]string{"LICENSE-APACHE": "Licensed under the Apache License, Version 2.0", "LICENSE-MIT.txt": "Permission is hereby granted, free of charge, to any person obtaining a copy of this software. The above copyright notice and this permission notice shall be included in all copies or substantial portions of the Software."}),
		fakeModule(t, "example.com/none", map[string]string{"README.md": "MIT licensed"}),
		fakeModule(t, "example.com/unknown", map[string]string{"COPYING": "GNU GENERAL PUBLIC LICENSE Version 3"}),
		fakeModule(t, "example.com/advertising", map[string]string{"LICENCE": "Redistribution and use in source and binary forms, with or without modification, are permitted provided that the following conditions are met: ... All advertising materials mentioning features or use of this software must display"}),
	}
	var out, errOut bytes.Buffer
	if report(&out, &errOut, mods, []string{"MIT", "Apache-2.0"}, false) {
		t.Errorf("report found nothing wrong; stdout:\n%s", out.String())
	}
	for _, want := range []string{
		"example.com/none v1.0.0 has no LICENSE, LICENCE or COPYING file",
		"example.com/unknown v1.0.0: " + mods[3].dir + "/COPYING is a license this check does not know",
		"example.com/advertising v1.0.0 is licensed BSD-4-Clause, which is not allowed",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("the problems do not say %q:\n%s", want, errOut.String())
		}
	}
	wantTable := "licenses of the 5 modules linked into the plugin:\n" +
		"  Apache-2.0 AND MIT                     1\n" +
		"  MIT                                    1\n"
	if out.String() != wantTable {
		t.Errorf("the table is\n%s\nwant\n%s", out.String(), wantTable)
	}

	out.Reset()
	errOut.Reset()
	if !report(&out, &errOut, mods[:2], []string{"MIT", "Apache-2.0"}, false) || errOut.Len() > 0 {
		t.Errorf("two modules of allowed licenses refused: %s", errOut.String())
	}
}

// The modules are those linked into the plugin's binary: go-plugin (what it
// serves the controller with) and the plugin's own module are; go-cmp, in
// go.mod for the tests only, is not.
func TestTheModulesAreThoseOfTheBinary(t *testing.T) {
	mods, err := linkedModules("../..", []string{"linux/amd64"})
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range mods {
		linked[m.path] = true
	}
	for path, want := range map[string]bool{
		"github.com/hashicorp/go-plugin":            true,
		"github.com/gatewayapi-ssa/rollouts-plugin": true,
		"github.com/google/go-cmp":                  false,
	} {
		if linked[path] != want {
			t.Errorf("%s linked: %v, want %v (of %d modules)", path, linked[path], want, len(mods))
		}
	}
}

func fakeModule(t *testing.T, path string, files map[string]string) module {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return module{path: path, version: "v1.0.0", dir: dir}
}
