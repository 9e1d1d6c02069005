package plugin

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// InitPlugin builds the clients once: called again, it builds nothing and
// keeps the reader (and its watch caches) it has.
func TestInitPluginTwiceBuildsOnce(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+s.URL+`"}}]
users: [{name: u}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	p := New(Options{}, quietLog())
	if e := p.InitPlugin(); e.HasError() {
		t.Fatal(e.ErrorString)
	}
	reader, orch, dyn := p.reader, p.orch, p.dyn
	for range 3 {
		if e := p.InitPlugin(); e.HasError() {
			t.Fatal(e.ErrorString)
		}
	}
	if p.reader != reader || p.orch != orch || p.dyn != dyn {
		t.Error("InitPlugin called again built new clients")
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("InitPlugin sent %d requests; it builds clients, it does not call the apiserver", n)
	}
}
