package kubeclient

import (
	"context"
	"sync"
)

// Flights lets calls that ask the apiserver the same question at once share
// one request: the first call asks, the others wait for its answer (each no
// longer than its own context), and a call after the answer asks again, so
// what is worth remembering is the caller's to remember, inside ask, and to
// say through remembered. The zero value is ready to use.
type Flights[K comparable, V any] struct {
	mu     sync.Mutex
	flying map[K]*flight[V]
}

// flight is one question being asked, and its answer once done is closed;
// waiters counts the calls that came to wait for it.
type flight[V any] struct {
	done    chan struct{}
	value   V
	err     error
	waiters int
}

// Do answers with what remembered answers for key, when it has an answer;
// else with what ask answers: the call's own ask, or the one of a call
// already asking. A call about to ask looks at remembered once more: a
// flight that ended after the call first looked, and before it could join
// that flight, has remembered its answer by then (ask remembers it before
// the flight ends), and it is not asked again.
func (f *Flights[K, V]) Do(ctx context.Context, key K, remembered func() (V, bool), ask func() (V, error)) (V, error) {
	if v, ok := remembered(); ok {
		return v, nil
	}
	f.mu.Lock()
	fl, waiting := f.flying[key]
	if !waiting {
		fl = &flight[V]{done: make(chan struct{})}
		if f.flying == nil {
			f.flying = map[K]*flight[V]{}
		}
		f.flying[key] = fl
	} else {
		fl.waiters++
	}
	f.mu.Unlock()
	if waiting {
		select {
		case <-fl.done:
			return fl.value, fl.err
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
	}
	if v, ok := remembered(); ok {
		fl.value = v
	} else {
		fl.value, fl.err = ask()
	}
	f.mu.Lock()
	delete(f.flying, key)
	f.mu.Unlock()
	close(fl.done)
	return fl.value, fl.err
}
