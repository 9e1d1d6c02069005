package orchestrator

import "sync"

// maxLoggedGateways bounds the parents remembered as logged (sayUnchecked):
// a route's owner names its parents, so a tenant could name ever new ones.
// One forgotten is logged again the next time, nothing more.
const maxLoggedGateways = 1000

// loggedOnce remembers which keys were logged, at most max of them: the
// oldest is forgotten first.
type loggedOnce struct {
	mu    sync.Mutex
	max   int
	seen  map[string]struct{}
	order []string // oldest first
}

// first says whether key is new, and remembers it.
func (l *loggedOnce) first(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[key]; ok {
		return false
	}
	if l.seen == nil {
		l.seen = map[string]struct{}{}
	}
	if len(l.order) >= l.max {
		delete(l.seen, l.order[0])
		l.order = l.order[1:]
	}
	l.seen[key] = struct{}{}
	l.order = append(l.order, key)
	return true
}

// len is how many keys it remembers.
func (l *loggedOnce) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// GatewaysLogged is how many parents the orchestrator remembers having
// logged as carrying what their gateway could not be asked about (package
// metrics); at most maxLoggedGateways.
func (o *Orchestrator) GatewaysLogged() int { return o.loggedGateways.len() }
