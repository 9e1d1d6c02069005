package kubeclient

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
		f.Do(context.Background(), "q", nothing, ask)
	}()
	<-started
	for !flying(&f, "q") {
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Do(ctx, "q", nothing, ask); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended got %v, want context.Canceled", err)
	}

	var wg sync.WaitGroup
	got := make([]int, 20)
	for i := range got {
		wg.Go(func() { got[i], _ = f.Do(context.Background(), "q", nothing, ask) })
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
	if _, err := f.Do(context.Background(), "q", nothing, func() (int, error) { asks.Add(1); return 0, failing }); !errors.Is(err, failing) {
		t.Errorf("the call after the answer got %v, want its own ask's error", err)
	}
	if n := asks.Load(); n != 2 {
		t.Errorf("%d asks, want the call after the answer to ask again (2)", n)
	}
}

// nothing is a caller that remembers no answer.
func nothing() (int, bool) { return 0, false }

// A remembered answer is the answer, with no ask. A call that missed it and
// then found no flight to join (the flight that remembered it ended in
// between) looks again before it asks, and takes what is remembered now.
func TestFlightsLookAgainBeforeAsking(t *testing.T) {
	var f Flights[string, int]
	asked := false
	ask := func() (int, error) { asked = true; return 0, errors.New("asked") }
	if v, err := f.Do(context.Background(), "q", func() (int, bool) { return 7, true }, ask); v != 7 || err != nil || asked {
		t.Errorf("with an answer remembered: %d, %v, asked %v; want 7 and no ask", v, err, asked)
	}
	looks := 0
	rememberedSince := func() (int, bool) { // nothing at the first look, the answer at the second
		looks++
		return 42, looks > 1
	}
	if v, err := f.Do(context.Background(), "q", rememberedSince, ask); v != 42 || err != nil || asked || looks != 2 {
		t.Errorf("remembered between the two looks: %d, %v, asked %v, %d looks; want 42, no ask, 2 looks", v, err, asked, looks)
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
