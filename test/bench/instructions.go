package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// With -instructions the plugin runs under valgrind's callgrind, and the
// bench counts the instructions it executes during its steady steps. CPU
// seconds on a shared VM move with the machine (the same build measured
// 0.53 and 1.07 ms per route on two runs of one day); an instruction count
// does not, so it can tell a change of the plugin from a change of the
// machine. The plugin runs some 50 times slower under it: the time columns
// of such a run are not the plugin's.

// callgrindWrapper writes a script into dir that runs bin under callgrind
// with its arguments, and returns the script's path. valgrind replaces the
// script's process (exec), so the plugin's pid is valgrind's, which
// callgrind_control addresses. Go's asynchronous preemption signals trip
// callgrind's signal bookkeeping (an assertion in valgrind 3.19), so they
// are turned off; the goroutines still yield at function calls. valgrind
// runs one thread at a time: a Go thread spinning for work then spins for
// its whole time slice, which the count would take in (runs of one build
// differed by half), so the plugin runs on one P (GOMAXPROCS=1), where no
// thread spins. Go reads the time stamp counter with RDTSCP where the CPU
// has it, when a lock is contended; valgrind 3.19 cannot decode RDTSCP and
// kills the process (SIGILL, seen when the machine is loaded), so Go is told
// the CPU lacks it (cpu.rdtscp=off: MFENCE, LFENCE and RDTSC instead).
func callgrindWrapper(bin, dir string) (string, error) {
	if _, err := exec.LookPath("valgrind"); err != nil {
		return "", fmt.Errorf("-instructions needs valgrind (Debian: apt-get install valgrind): %w", err)
	}
	if _, err := exec.LookPath("callgrind_control"); err != nil {
		return "", fmt.Errorf("-instructions needs callgrind_control (Debian's valgrind package has it): %w", err)
	}
	path := filepath.Join(dir, "plugin-under-callgrind.sh")
	script := fmt.Sprintf("#!/bin/sh\nGODEBUG=asyncpreemptoff=1,cpu.rdtscp=off GOMAXPROCS=1 exec valgrind --tool=callgrind --log-file=%q --callgrind-out-file=%q %q \"$@\"\n",
		filepath.Join(dir, "callgrind-%p.log"), filepath.Join(dir, "callgrind-%p.out"), bin)
	return path, os.WriteFile(path, []byte(script), 0o700)
}

// instructions counts the instructions of the plugin process pid (running
// under callgrindWrapper's script, writing into dir) between start and
// stop.
type instructions struct {
	pid   int
	dir   string
	dumps int
}

// start sets the process's counters to zero.
func (c *instructions) start() error { return c.control("-z") }

// stop dumps the counters and returns the instructions executed since
// start.
func (c *instructions) stop() (uint64, error) {
	if err := c.control("-d"); err != nil {
		return 0, err
	}
	c.dumps++
	// callgrind numbers a process's dumps from 1, in a file each.
	path := filepath.Join(c.dir, fmt.Sprintf("callgrind-%d.out.%d", c.pid, c.dumps))
	return dumpTotal(path)
}

func (c *instructions) control(flag string) error {
	out, err := exec.Command("callgrind_control", flag, strconv.Itoa(c.pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("callgrind_control %s %d: %w: %s", flag, c.pid, err, out)
	}
	return nil
}

// dumpTotal reads the instruction count of a callgrind dump (its "totals:"
// line; the only event counted is Ir).
func dumpTotal(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "totals:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no totals line", path)
}
