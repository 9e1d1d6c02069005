package kube

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Twenty calls asking at once share one ask; a waiter whose context ends
// stops waiting; a call after the answer asks again.
func TestFlightsShareOneAskAtATime(t *testing.T) {
	var f Flights[string, int]
	var asks atomic.Int32
	release := make(chan struct{})
	ask := func() (int, error) {
		asks.Add(1)
		<-release
		return 42, nil
	}
	started := make(chan struct{})
	go func() { // the first caller: its ask holds the flight open
		close(started)
		f.Do(context.Background(), "q", ask)
	}()
	<-started
	for !flying(&f, "q") {
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Do(ctx, "q", ask); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended got %v, want context.Canceled", err)
	}

	var wg sync.WaitGroup
	got := make([]int, 20)
	for i := range got {
		wg.Go(func() { got[i], _ = f.Do(context.Background(), "q", ask) })
	}
	for waiting(&f, "q") < 21 { // the 20 and the one whose context ended
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, v := range got {
		if v != 42 {
			t.Errorf("caller %d got %d, want 42", i, v)
		}
	}
	if n := asks.Load(); n != 1 {
		t.Errorf("%d asks for 22 callers at once, want 1", n)
	}

	failing := errors.New("no answer")
	if _, err := f.Do(context.Background(), "q", func() (int, error) { asks.Add(1); return 0, failing }); !errors.Is(err, failing) {
		t.Errorf("the call after the answer got %v, want its own ask's error", err)
	}
	if n := asks.Load(); n != 2 {
		t.Errorf("%d asks, want the call after the answer to ask again (2)", n)
	}
}

// flying says whether a question is being asked.
func flying[K comparable, V any](f *Flights[K, V], key K) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.flying[key]
	return ok
}

// waiting is how many calls have waited for the question being asked.
func waiting[K comparable, V any](f *Flights[K, V], key K) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.flying[key]; ok {
		return fl.waiters
	}
	return 0
}
