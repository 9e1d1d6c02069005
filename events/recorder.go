package events

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
)

// How a Recorder spends the Events API. The figures are the design's; the
// apiserver's own limits (API Priority and Fairness, the EventRateLimit
// admission plugin where a cluster enables it) answer 429, and the Recorder
// then pauses.
const (
	// queueSize bounds the Events waiting to be sent; more are dropped.
	queueSize = 1024
	// maxSeries bounds the Events the Recorder remembers (to count repeats).
	maxSeries = 4096
	// requestTimeout bounds each request to the Events API.
	requestTimeout = 5 * time.Second
	// sendQPS and sendBurst are the Recorder's own token bucket: the calls'
	// requests never wait for an Event's. A step over 50 routes (one or two
	// Events each) goes out at once.
	sendQPS, sendBurst = 10, 100
	// seriesEvery: a series' count is sent at most this often (the
	// controller repeats a failing call every few seconds).
	seriesEvery = 5 * time.Second
	// seriesEnd: a Warning not seen again for this long is forgotten; seen
	// after that, it is a new Event. changeEnd: the same for a Normal Event
	// (a change seen again is a loop of the controller's, seconds apart).
	seriesEnd, changeEnd = 10 * time.Minute, 2 * time.Minute
	// newWarnings and newWarningEvery: per object and reason, a Warning
	// with a text not sent before is a new Event at most newWarnings times
	// at once, then once per newWarningEvery; otherwise it counts in the
	// series of the newest Warning of that object and reason.
	newWarnings, newWarningEvery = 5, 30 * time.Second
	// deniedPause: after a 403, nothing is sent to that namespace for this long.
	deniedPause = time.Minute
	// maxNote is the Events API's limit on a note, in bytes.
	maxNote = 1024
)

// cutSuffix ends a note cut to maxNote.
const cutSuffix = " … (cut to the Events API's 1024 bytes; the whole text is in the plugin's log)"

// Event is one thing to tell people about an object.
type Event struct {
	// Regarding is the object the Event is about; the Event goes in its
	// namespace. Related is another object it concerns (the Rollout, for
	// an Event about a route), or nil.
	Regarding corev1.ObjectReference
	Related   *corev1.ObjectReference
	// Type is Normal or Warning; Reason says in one word what happened,
	// Action what the plugin was doing (the call), Note the text.
	Type, Reason, Action, Note string
}

// Options name who records the Events.
type Options struct {
	// Controller is every Event's reportingController: the plugin's field
	// manager.
	Controller string
	// Instance is every Event's reportingInstance: the process (host/pid).
	Instance string
}

// Recorder sends Events to one cluster's Events API, best effort: Record
// never blocks, and nothing a call does waits for an Event.
type Recorder struct {
	// queue holds pointers, so that its buffer, allocated for the life
	// of the process, is not queueSize whole Events.
	queue chan *Event
	// recorded and dropped count the Events handed to Record: queued to
	// be sent, or dropped for a full queue.
	recorded, dropped atomic.Int64
	state             *state
}

// Recorded says how many Events were handed to the Recorder so far: queued
// to be sent (a repeat counts in its series), and dropped because the
// queue was full (the Events API slow or unreachable), for people watching
// the plugin (package metrics).
func (r *Recorder) Recorded() (queued, dropped int64) {
	if r == nil {
		return 0, 0
	}
	return r.recorded.Load(), r.dropped.Load()
}

// NewRecorder returns a Recorder for the cluster of cfg, already running.
// Its requests have their own token bucket; they do not go through the
// calls' (kubeclient.NewClients).
func NewRecorder(cfg *rest.Config, o Options, log *logrus.Entry) (*Recorder, error) {
	s, err := newHTTPSink(cfg) // no token bucket but the Recorder's own (state.limit)
	if err != nil {
		return nil, fmt.Errorf("building the Events client: %w", err)
	}
	r := newRecorder(s, o, log)
	go r.run()
	return r, nil
}

// newRecorder returns a Recorder that sends to s; run starts it.
func newRecorder(s sink, o Options, log *logrus.Entry) *Recorder {
	return &Recorder{
		queue: make(chan *Event, queueSize),
		state: newState(s, o, log),
	}
}

// Record hands e to the Recorder. It never blocks: when the queue is full,
// e is dropped.
func (r *Recorder) Record(e Event) {
	if r == nil {
		return
	}
	select {
	case r.queue <- &e:
		r.recorded.Add(1)
	default:
		if r.dropped.Add(1) == 1 {
			r.state.log.Warn("the queue of Events to record is full: Events are dropped (the Events API is slow or unreachable)")
		}
	}
}

// run sends the Events recorded, and the series' counts when due, for the
// life of the process.
func (r *Recorder) run() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case e := <-r.queue:
			r.state.observe(*e, time.Now())
		case now := <-tick.C:
			r.state.flush(now)
		}
	}
}

// sink is the Events API.
type sink interface {
	create(ctx context.Context, e *eventsv1.Event) (name string, err error)
	patch(ctx context.Context, namespace, name string, mergePatch []byte) error
}

// key is what makes two Events the same: a repeat raises the first one's
// count.
type key struct {
	regarding         corev1.ObjectReference
	typ, reason, note string
}

// kindKey is an object and a reason: the unit of newWarnings.
type kindKey struct {
	regarding   corev1.ObjectReference
	typ, reason string
}

// kindOf is the object and reason of e.
func kindOf(e Event) kindKey {
	return kindKey{regarding: e.Regarding, typ: e.Type, reason: e.Reason}
}

// key is what makes s's Event the same as another.
func (s *series) key() key {
	return key{regarding: s.ev.Regarding, typ: s.ev.Type, reason: s.ev.Reason, note: s.ev.Note}
}

// series is one Event and how often it was seen.
type series struct {
	ev          Event
	first, last time.Time
	// count is how often it was seen; sent the count the apiserver has.
	count, sent int32
	// name is the Event's name once created.
	name    string
	sentAt  time.Time
	retryAt time.Time
	fails   int
	// refused: the apiserver refused it as invalid; it is never sent again.
	refused bool
}

// state is the Recorder's memory; only its goroutine touches it.
type state struct {
	sink sink
	opts Options
	log  *logrus.Entry

	series *seriesSet
	// latest is the newest series of Warnings of each object and reason
	// (only Warnings have a budget of new texts). A Normal Event is a route's
	// change, one per kind of change each step: its series are the most
	// the Recorder holds, so they are kept once only, in series.
	latest   map[kindKey]*series
	newWarns map[kindKey]*bucket
	limit    bucket
	// pausedUntil: a 429 asked to wait; deniedUntil: a 403 in a namespace.
	pausedUntil time.Time
	deniedUntil map[string]time.Time
	// lastRelated is the Related of the newest series (see related).
	lastRelated *corev1.ObjectReference
	// saidDenied, saidInvalid: said once in the log.
	saidDenied, saidInvalid bool
}

func newState(s sink, o Options, log *logrus.Entry) *state {
	return &state{
		sink: s, opts: o, log: log,
		series:      newSeriesSet(),
		latest:      map[kindKey]*series{},
		newWarns:    map[kindKey]*bucket{},
		limit:       bucket{rate: sendQPS, burst: sendBurst},
		deniedUntil: map[string]time.Time{},
	}
}

// observe takes an Event seen at now: a repeat counts in its series, a new
// one is sent (or, a new Warning over its object's and reason's budget,
// counts in the newest series of them).
func (st *state) observe(e Event, now time.Time) {
	e.Note = cut(e.Note)
	k := key{regarding: e.Regarding, typ: e.Type, reason: e.Reason, note: e.Note}
	if s, ok := st.series.get(k); ok {
		st.again(s, now)
		return
	}
	warning, kk := e.Type == corev1.EventTypeWarning, kindOf(e)
	if warning && !st.newWarning(kk, now) {
		if s := st.latest[kk]; s != nil {
			st.again(s, now)
			return
		}
	}
	if st.series.len() >= maxSeries && !st.forgetOldest() {
		return
	}
	st.related(&e)
	s := &series{ev: e, first: now, last: now, count: 1}
	st.series.put(k, s)
	if warning {
		st.latest[kk] = s
	}
	st.sendIfDue(s, now)
}

// related makes e's Related the one of the Event observed before when they
// are the same (the Rollout of every route's Event of a call), so that a
// series does not keep a copy of its own.
func (st *state) related(e *Event) {
	switch {
	case e.Related == nil:
	case st.lastRelated != nil && *st.lastRelated == *e.Related:
		e.Related = st.lastRelated
	default:
		st.lastRelated = e.Related
	}
}

// forget drops s.
func (st *state) forget(s *series) {
	st.series.delete(s.key())
	if kk := kindOf(s.ev); st.latest[kk] == s {
		delete(st.latest, kk)
	}
}

// forgetOldest drops the series seen longest ago whose count is sent, to
// make room; false if every series still has something to send.
func (st *state) forgetOldest() bool {
	var oldest *series
	for s := range st.series.all() {
		if s.sent == s.count && (oldest == nil || s.last.Before(oldest.last)) {
			oldest = s
		}
	}
	if oldest == nil {
		return false
	}
	st.forget(oldest)
	return true
}

// end is how long s is remembered after it was last seen.
func (s *series) end() time.Duration {
	if s.ev.Type == corev1.EventTypeWarning {
		return seriesEnd
	}
	return changeEnd
}

// again counts one more sighting of s.
func (st *state) again(s *series, now time.Time) {
	s.count++
	s.last = now
	st.sendIfDue(s, now)
}

// newWarning says whether a Warning with a new text for kk may be a new Event.
func (st *state) newWarning(kk kindKey, now time.Time) bool {
	b := st.newWarns[kk]
	if b == nil {
		b = &bucket{rate: 1 / newWarningEvery.Seconds(), burst: newWarnings}
		st.newWarns[kk] = b
	}
	return b.take(now)
}

// flush sends the counts that are due and forgets the series that ended.
func (st *state) flush(now time.Time) {
	for s := range st.series.all() {
		if now.Sub(s.last) > s.end() {
			st.forget(s)
			continue
		}
		st.sendIfDue(s, now)
	}
	for kk, b := range st.newWarns {
		if b.full(now) {
			delete(st.newWarns, kk)
		}
	}
}

// sendIfDue sends what the apiserver does not have of s yet, unless it
// must wait: a series' count at most every seriesEvery, nothing while the
// apiserver asked to wait or refused the namespace, nothing beyond the
// token bucket.
func (st *state) sendIfDue(s *series, now time.Time) {
	ns := s.ev.Regarding.Namespace
	switch {
	case s.refused || s.sent == s.count || now.Before(s.retryAt):
		return
	case s.name != "" && now.Sub(s.sentAt) < seriesEvery:
		return
	case now.Before(st.pausedUntil) || now.Before(st.deniedUntil[ns]):
		return
	case !st.limit.take(now):
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var err error
	if s.name != "" {
		err = st.sink.patch(ctx, ns, s.name, seriesPatch(s))
		if apierrors.IsNotFound(err) {
			s.name = "" // gone (the Events' time to live passed, or deleted): create it again
		}
	}
	if s.name == "" {
		s.name, err = st.sink.create(ctx, st.build(s, now))
	}
	st.answer(s, err, now)
}

// answer takes what the apiserver said to a request for s.
func (st *state) answer(s *series, err error, now time.Time) {
	ns := s.ev.Regarding.Namespace
	switch {
	case err == nil:
		s.sent, s.sentAt, s.fails, s.retryAt = s.count, now, 0, time.Time{}
		return
	case apierrors.IsForbidden(err):
		st.deniedUntil[ns] = now.Add(deniedPause)
		if !st.saidDenied {
			st.saidDenied = true
			st.log.WithField("namespace", ns).Warnf("the plugin may not record Events: grant its ServiceAccount create and patch on "+
				"events.events.k8s.io (install/base); the calls go on without them, and the plugin tries again every %s: %v", deniedPause, err)
		}
		return
	case apierrors.IsTooManyRequests(err):
		delay := 10 * time.Second
		if d, ok := apierrors.SuggestsClientDelay(err); ok && d > 0 {
			delay = time.Duration(d) * time.Second
		}
		st.pausedUntil = now.Add(delay)
		return
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		s.refused = true
		if !st.saidInvalid {
			st.saidInvalid = true
			st.log.WithFields(logrus.Fields{"reason": s.ev.Reason, "regarding": s.ev.Regarding.Kind + " " + ns + "/" + s.ev.Regarding.Name}).
				Warnf("the apiserver refused an Event the plugin built (please report it): %v", err)
		}
		return
	}
	// Unanswered, 5xx, a name taken: try again later.
	s.fails++
	s.retryAt = now.Add(retry.EventDelay(s.fails))
	st.log.WithFields(logrus.Fields{"reason": s.ev.Reason, "error": err.Error()}).Debug("could not record an Event; trying again later")
}

// build is the Event to create for s.
func (st *state) build(s *series, now time.Time) *eventsv1.Event {
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// As client-go names Events; the name is cut so that the suffix fits in 253.
			Name:      fmt.Sprintf("%.236s.%x", s.ev.Regarding.Name, now.UnixNano()),
			Namespace: s.ev.Regarding.Namespace,
		},
		EventTime:           metav1.NewMicroTime(s.first),
		ReportingController: st.opts.Controller,
		ReportingInstance:   st.opts.Instance,
		Action:              s.ev.Action,
		Reason:              s.ev.Reason,
		Regarding:           s.ev.Regarding,
		Related:             s.ev.Related,
		Note:                s.ev.Note,
		Type:                s.ev.Type,
	}
	if s.count > 1 {
		e.Series = &eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(s.last)}
	}
	return e
}

// seriesPatch is the merge patch that sets s's count.
func seriesPatch(s *series) []byte {
	data, _ := json.Marshal(map[string]any{"series": eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(s.last)}})
	return data
}

// cut shortens a note to the Events API's limit, on a character boundary.
func cut(note string) string {
	if len(note) <= maxNote {
		return note
	}
	n := maxNote - len(cutSuffix)
	for n > 0 && !utf8.RuneStart(note[n]) {
		n--
	}
	return note[:n] + cutSuffix
}

// bucket is a token bucket on the caller's clock.
type bucket struct {
	rate, burst float64
	tokens      float64
	at          time.Time
}

// take takes a token at now, if there is one.
func (b *bucket) take(now time.Time) bool {
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// full says whether the bucket is full at now (and so need not be kept).
func (b *bucket) full(now time.Time) bool {
	b.refill(now)
	return b.tokens >= b.burst
}

func (b *bucket) refill(now time.Time) {
	if b.at.IsZero() {
		b.tokens, b.at = b.burst, now
		return
	}
	if now.After(b.at) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.at).Seconds()*b.rate)
		b.at = now
	}
}
