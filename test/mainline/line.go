package main

import (
	"slices"
	"strings"
)

// model is the package whose functions are the model's accessors: the line
// enters it from every stage, and a reader does not open them to follow a
// call, so the re-entries and the stages are also counted without it.
const model = "routes"

// step is one record of a line with the function that called it ("" for
// the line's first), that call's index in the line (-1 for none) and its
// depth in the whole line, across goroutines.
type step struct {
	record
	caller string
	up     int
	indent int
}

// walk finds who called each record: the last record of its goroutine one
// level up, or, for a goroutine's first, what its parent goroutine ran
// last.
func walk(recs []record) []step {
	stacks := map[int64][]int{} // each goroutine's steps, by depth
	indent := map[int64]int{}   // a goroutine's depth in its parent's line
	steps := make([]step, 0, len(recs))
	for i, r := range recs {
		if _, seen := stacks[r.G]; !seen {
			indent[r.G] = indent[r.Parent] + len(stacks[r.Parent])
		}
		st := stacks[r.G][:min(r.Depth, len(stacks[r.G]))]
		s := step{record: r, up: -1, indent: indent[r.G] + len(st)}
		if len(st) > 0 {
			s.up = st[len(st)-1]
		} else if up := stacks[r.Parent]; len(up) > 0 {
			s.up = up[len(up)-1]
		}
		if s.up >= 0 {
			s.caller = steps[s.up].Name
		}
		steps = append(steps, s)
		stacks[r.G] = append(st, i)
	}
	return steps
}

// counts is what report prints of one line.
type counts struct {
	funcs, pkgs []string // in the order the line first enters them
	// again: how often the line enters a package it had entered and left
	// before; againOutside: the same, leaving out the model's package.
	again, againOutside int
	entered             []string // caller→callee package of every entry
	stages              []stage  // see isStage; in the order first entered
}

// stage is a stage function and how many stages enclose it where the line
// first enters it.
type stage struct {
	name  string
	depth int
}

func count(line []step) counts {
	var c counts
	entries := map[string]int{}
	depth := make([]int, len(line)) // stages enclosing each step, itself included
	for i, s := range line {
		if s.up >= 0 {
			depth[i] = depth[s.up]
		}
		if isStage(s) {
			if !slices.ContainsFunc(c.stages, func(st stage) bool { return st.name == s.Name }) {
				c.stages = append(c.stages, stage{s.Name, depth[i]})
			}
			depth[i]++
		}
		pkg := pkgOf(s.Name)
		if s.caller == "" || pkgOf(s.caller) != pkg {
			entries[pkg]++
			c.entered = append(c.entered, pkgOf(s.caller)+"→"+pkg)
		}
		if !slices.Contains(c.funcs, s.Name) {
			c.funcs = append(c.funcs, s.Name)
		}
		if !slices.Contains(c.pkgs, pkg) {
			c.pkgs = append(c.pkgs, pkg)
		}
	}
	for pkg, n := range entries {
		if n > 1 {
			c.again += n - 1
			if pkg != model {
				c.againOutside += n - 1
			}
		}
	}
	return c
}

// isStage says whether s enters a stage: a function a reader opens to follow
// the call from the RPC method to the apply. It is the line's first
// function, or one entered from another package of the module (what a
// package calls inside itself is read as part of the stage that entered
// it), leaving out the model's functions and the formatting methods
// (String and Error, which the line reaches through fmt or a log line,
// not as a step of the call).
func isStage(s step) bool {
	if s.caller == "" {
		return true
	}
	pkg := pkgOf(s.Name)
	if pkg == pkgOf(s.caller) || pkg == model {
		return false
	}
	method := s.Name[strings.LastIndex(s.Name, ".")+1:]
	return method != "String" && method != "Error"
}
