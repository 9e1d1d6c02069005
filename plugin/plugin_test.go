package plugin

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/sirupsen/logrus"
)

// InitPlugin builds the clients once: called again, it builds nothing and
// keeps the reader (and its watch caches) it has.
func TestInitPluginTwiceBuildsOnce(t *testing.T) {
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1); w.WriteHeader(404) }))
	defer s.Close()
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
	p := New(Options{}, logrus.NewEntry(logrus.New()))
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
	if n := hits.Load(); n != 0 {
		t.Errorf("InitPlugin sent %d requests; it builds clients, it does not call the apiserver", n)
	}
}
