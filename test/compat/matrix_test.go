// Package compat is the Gateway API compatibility matrix: every call the
// Argo Rollouts controller makes, through the real plugin binary over
// go-plugin RPC, on every route kind the CRDs of each Gateway API release and
// channel serve (harness.Releases), each on a kube-apiserver of its own.
// docs/performance/compatibility-matrix.md holds the table it measures; TestCompatibility fails
// on every cell that disagrees with the page, and -update writes what it
// measured into the page.
package compat

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

var update = flag.Bool("update", false, "write the cells this run measured into docs/performance/compatibility-matrix.md's table")

// releasesEnv picks the releases a run installs: "all", or releases
// separated by commas; unset, the short form make test runs, the oldest and
// the newest release.
const releasesEnv = "GATEWAY_API_RELEASES"

// pluginBin is the plugin binary, built once for the run.
var pluginBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The cells read old versions on purpose: no deprecation warnings.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	dir, err := os.MkdirTemp("", "gatewayapi-ssa-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// PLUGIN_BIN runs the matrix against another build.
	if pluginBin = os.Getenv("PLUGIN_BIN"); pluginBin == "" {
		pluginBin, err = harness.BuildPlugin(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func releasesToRun() ([]string, error) {
	switch v := os.Getenv(releasesEnv); v {
	case "":
		return []string{harness.Releases[0], harness.Releases[len(harness.Releases)-1]}, nil
	case "all":
		return harness.Releases, nil
	default:
		out := strings.Split(v, ",")
		for _, r := range out {
			if !slices.Contains(harness.Releases, r) {
				return nil, fmt.Errorf("%s=%s: %s is not one of %v", releasesEnv, v, r, harness.Releases)
			}
		}
		return out, nil
	}
}

// Each release's channel on a cluster of its own, started, measured and
// stopped in turn: every feature on every route kind it serves, each cell
// compared with the page.
func TestCompatibility(t *testing.T) {
	p, err := readPage()
	if err != nil {
		t.Fatal(err)
	}
	releases, err := releasesToRun()
	if err != nil {
		t.Fatal(err)
	}
	// measured holds the cells this run measured; served, every row the
	// clusters it started serve, measured or not (-run).
	measured, served := table{}, map[rowKey]bool{}
	var timings []string
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			for _, ch := range channels {
				t.Run(string(ch), func(t *testing.T) {
					timings = append(timings, measureChannel(t, release, ch, p.rows, measured, served))
				})
			}
		})
	}
	started := map[rowKey]bool{}
	for k := range served {
		started[k.channelOnly()] = true
	}
	for k, r := range p.rows {
		if started[k.channelOnly()] && !served[k] {
			t.Errorf("the page has a row for %s %s %s %s, a route kind the release's channel does not serve", k.release, k.channel, k.kind, r.version)
		}
	}
	t.Logf("the table this run measured:\n%s", measured.render())
	t.Logf("timings:\n%s", strings.Join(timings, "\n"))
	if *update {
		for k, r := range measured {
			for _, f := range features {
				if was := p.rows[k].cells[f.name]; was != "" && (r.cells[f.name] == "" || r.cells[f.name] == failed) {
					// A cell not run keeps its value; what to write for a
					// failure is for a person to say.
					r.cells[f.name] = was
				}
			}
			p.rows[k] = r
		}
		if err := p.write(); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", pagePath)
	}
}

// measureChannel measures every cell of one release's channel into
// measured, notes the rows it serves in served, and says how long it took.
func measureChannel(t *testing.T, release string, ch harness.Channel, want, measured table, served map[rowKey]bool) (timing string) {
	start := time.Now()
	c, err := harness.StartRelease(release, ch)
	if err != nil {
		t.Fatal(err)
	}
	up := time.Since(start)
	n := 0
	defer func() {
		cells := time.Since(start) - up
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		round := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
		timing = fmt.Sprintf("%s %s: %s in all; the cluster up in %s, %d cells in %s, stopped in %s", release, ch,
			round(time.Since(start)), round(up), n, round(cells), round(time.Since(start)-up-cells))
	}()
	log := &pluginLog{}
	plugin, err := harness.StartPlugin(pluginBin, c.Kubeconfig, log)
	if err != nil {
		t.Fatal(err)
	}
	defer plugin.Stop()
	kinds, err := servedKinds(c)
	if err != nil {
		t.Fatal(err)
	}
	cl := cluster{Cluster: c, plugin: plugin.Plugin, log: log}
	for _, k := range kinds {
		served[rowKey{release, ch, k.Kind}] = true
		t.Run(k.Kind, func(t *testing.T) {
			key := rowKey{release, ch, k.Kind}
			r := row{rowKey: key, version: k.Version, cells: map[string]string{}}
			measured[key] = r
			page, onPage := want[key]
			switch {
			case !onPage:
				t.Errorf("the page has no row for %s %s %s %s", release, ch, k.Kind, k.Version)
			case page.version != k.Version:
				t.Errorf("the page says the plugin uses %s %s, it uses %s", k.Kind, page.version, k.Version)
			}
			for _, f := range features {
				t.Run(f.name, func(t *testing.T) {
					o := measure(cl, k, f)
					n++
					r.cells[f.name] = o.value
					switch {
					case o.value == failed:
						t.Errorf("the cell failed: %s", o.detail)
					case !onPage || page.cells[f.name] == o.value:
						if o.detail != "" {
							t.Log(o.detail)
						}
					case *update:
						t.Logf("the page said %s, the cell measured %s (written to the page): %s", page.cells[f.name], o.value, o.detail)
					default:
						t.Errorf("the page says %s, the cell measured %s: %s", page.cells[f.name], o.value, o.detail)
					}
				})
			}
		})
	}
	return ""
}
