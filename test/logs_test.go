package test

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// hclogLine is one line go-plugin's client logged, as hclog writes JSON.
type hclogLine map[string]any

// clientLog starts the plugin as the Argo Rollouts controller does, under a
// go-plugin client whose logger (named plugin, at trace, as the
// controller's default; go-plugin names it after the binary, gatewayAPI under
// the controller, which copies it to plugin-bin/<registered name>) writes
// JSON here, with the plugin's default log
// format unless args set one.
func clientLog(t *testing.T, standard *harness.Cluster, args ...string) (*harness.PluginProcess, func() []hclogLine) {
	t.Helper()
	var out syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Trace, Name: "plugin", JSONFormat: true})
	p, err := harness.StartPluginLogged(pluginBin, standard.Kubeconfig, io.Discard, logger, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p, func() []hclogLine {
		var lines []hclogLine
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		for sc.Scan() {
			var l hclogLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("go-plugin's logger wrote %q, not JSON: %v", sc.Text(), err)
			}
			lines = append(lines, l)
		}
		return lines
	}
}

// A call's error reaches the controller's log at error level, its message
// and fields kept, as go-plugin logs an hclog entry: not at DEBUG, where
// level-based alerts and filters never see it (argo-rollouts #4117).
// -logformat=text, the old plugin's kind of line, still works and reaches
// it at DEBUG, as go-plugin logs any other line.
func TestThePluginsErrorsReachTheControllersLogAtTheirLevel(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	bad := rollout(ns, `{"httpRoute": "web", "noSuchKey": true}`)

	p, lines := clientLog(t, standard)
	if err := p.Plugin.SetWeight(bad, 30, nil); !err.HasError() {
		t.Fatal("SetWeight with an unknown key: no error")
	}
	var found hclogLine
	eventually(t, "the call's error in the client's log", func() bool {
		for _, l := range lines() {
			if l["rollout"] == ns+"/demo" && strings.Contains(l["@message"].(string), "noSuchKey") {
				found = l
				return true
			}
		}
		return false
	})
	for k, want := range map[string]string{"@level": "error", "@module": "plugin.rollouts-gatewayapi-ssa", "call": "SetWeight(30)"} {
		if found[k] != want {
			t.Errorf("%s = %v, want %q (the line: %v)", k, found[k], want, found)
		}
	}
	for _, l := range lines() {
		if l["@level"] == "debug" && strings.Contains(l["@message"].(string), "noSuchKey") {
			t.Errorf("the error also reached the log at debug: %v", l)
		}
	}

	text, textLines := clientLog(t, standard, "-logformat=text")
	if err := text.Plugin.SetWeight(bad, 30, nil); !err.HasError() {
		t.Fatal("SetWeight with an unknown key: no error")
	}
	eventually(t, "the call's error in the client's log, as text at debug", func() bool {
		for _, l := range textLines() {
			if m, _ := l["@message"].(string); l["@level"] == "debug" && strings.Contains(m, "level=error") && strings.Contains(m, "noSuchKey") {
				return true
			}
		}
		return false
	})
}
