package kube

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A watch cache is only as fresh as its watch. While the watch is cut (the
// apiserver restarted, the network failed) the cache keeps what it had, and
// a call that read it would answer from the state before: take a route
// changed meanwhile for unchanged, or miss another manager's change. So a
// watch that ends before its time, or reports an error (a 410 Gone among
// them: its resourceVersion was compacted away while it was disconnected),
// marks the cache broken: reads go to the apiserver (GET, LIST) until the
// cache has listed the routes again and holds that list, which it does
// before it watches again (a watch resumed from the old resourceVersion
// would bring the changes one by one, with no sign of when it has caught
// up). A watch the apiserver ends at its timeout, as it ends every watch
// after a few minutes, is resumed as usual.

// freshness is a watch cache's knowledge of whether its watch has seen
// every change.
type freshness struct {
	log *logrus.Entry

	mu sync.Mutex
	// broken: the watch ended early or failed; the cache may miss changes.
	broken bool
	// relisted is the resourceVersion of the list made since it broke (""
	// before it): once the cache holds it, it has caught up.
	relisted string
}

// ended is told that a watch ended with err (io.EOF: the apiserver closed
// it) after running for ran of its timeout.
func (f *freshness) ended(err error, ran, timeout time.Duration) {
	if errors.Is(err, io.EOF) && timeout > 0 && ran >= timeout-timeout/20 {
		return // the apiserver ends every watch at its timeout
	}
	f.breaks(err)
}

// breaks marks the cache as possibly missing changes.
func (f *freshness) breaks(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.broken {
		f.log.WithError(err).Info("the watch of routes broke; the plugin reads them from the apiserver until the watch cache has listed them again")
	}
	f.broken, f.relisted = true, ""
}

// listed is told the resourceVersion of a list of every route (a LIST, or
// a watch's initial events) the cache is about to hold.
func (f *freshness) listed(resourceVersion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		f.relisted = resourceVersion
	}
}

// mustList says a watch about to start would resume after a break: the
// cache must list again first.
func (f *freshness) mustList() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.broken && f.relisted == ""
}

// current says whether the cache may be read: its watch has not broken, or
// it holds what it listed since (holds: its last synced resourceVersion).
func (f *freshness) current(holds string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.broken {
		return true
	}
	if f.relisted == "" || routes.NewerVersion(f.relisted, holds) {
		return false
	}
	f.broken = false
	f.log.Info("the watch cache of routes has listed them again; reads come from it again")
	return true
}

// errListFirst is what a watch about to resume after a break answers: the
// reflector then lists (or streams the list) before it watches again.
func errListFirst(gvr schema.GroupVersionResource) error {
	return apierrors.NewResourceExpired("the watch of " + gvr.Resource + " broke: listing them again before the cache is read again")
}
