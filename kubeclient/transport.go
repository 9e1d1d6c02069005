package kubeclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
)

// Every request the plugin sends, from every client it builds, goes through
// one transport (set on the rest.Config the clients are built from). It gives
// each attempt its own timeout, so a hung apiserver costs one attempt, not the
// call; it retries what is worth retrying with bounded, jittered backoff inside
// the deadline of the call the request belongs to; and it draws every retry
// from the process's one token bucket, so retries do not raise the rate.

type retrying struct {
	next    http.RoundTripper
	limiter flowcontrol.RateLimiter
	policy  retry.Requests
	log     *logrus.Entry
	// requests counts every attempt (nil: none).
	requests *Requests
}

// newTransport wraps next with the plugin's retry policy; every retry waits
// for a token of limiter; requests counts every attempt.
func newTransport(next http.RoundTripper, limiter flowcontrol.RateLimiter, policy retry.Requests, log *logrus.Entry, requests *Requests) http.RoundTripper {
	return &retrying{next: next, limiter: limiter, policy: policy, log: log, requests: requests}
}

// RoundTrip sends the request, a watch as it is, anything else with the
// retry policy: each attempt with its own timeout, a retry only of what is
// safe to send again, within the call's deadline, after a backoff and a
// token of the limiter.
func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		// A watch lasts as long as it lasts; the informer restarts it.
		resp, err := t.next.RoundTrip(req)
		t.requests.count(req, resp, err)
		return resp, err
	}
	ctx := req.Context()
	repeatable := safeToRepeat(req)
	start := time.Now()
	for n := 1; ; n++ {
		a, err := t.send(ctx, req, n)
		if err != nil {
			return nil, err
		}
		if a.reason == "" {
			return a.answer()
		}
		delay := t.policy.Delay(n, a.after)
		if !repeatable || n >= t.policy.Attempts || !fits(ctx, delay) {
			return t.giveUp(req, a, start)
		}
		a.discard()
		t.log.WithFields(logrus.Fields{"method": req.Method, "path": req.URL.Path, "attempt": n,
			"reason": a.reason, "retryIn": delay.Round(time.Millisecond).String()}).Info("retrying a request to the apiserver")
		if err := t.wait(ctx, delay); err != nil {
			return nil, &requestError{attempts: n, elapsed: time.Since(start), reason: a.reason + "; then " + err.Error()}
		}
	}
}

// attempt is one attempt of a request and what the transport makes of it.
type attempt struct {
	n    int
	resp *http.Response
	err  error
	// reason says why another attempt is worth it ("" when it is not), after
	// how long the apiserver asked to wait.
	reason string
	after  time.Duration
	// cancel ends the attempt's context, which its answer's body needs.
	cancel context.CancelFunc
}

// send sends the n-th attempt of req, with its own timeout and, after the
// first, a body of its own, and counts it. The error is one of getting the
// body again: nothing was sent.
func (t *retrying) send(ctx context.Context, req *http.Request, n int) (attempt, error) {
	actx, cancel := context.WithTimeout(ctx, t.policy.Timeout)
	// A shallow copy: nothing below changes a request's headers or URL
	// (a RoundTripper must not), and each attempt gets its own body.
	r := req.WithContext(actx)
	if n > 1 && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			cancel()
			return attempt{}, err
		}
		r.Body = body
	}
	resp, err := t.next.RoundTrip(r)
	t.requests.count(req, resp, err)
	reason, after := t.retryable(ctx, actx, resp, err)
	return attempt{n: n, resp: resp, err: err, reason: reason, after: after, cancel: cancel}, nil
}

// answer is what RoundTrip returns for an attempt not worth retrying: its
// error, or its answer, whose body ends the attempt's context when closed.
func (a attempt) answer() (*http.Response, error) {
	if a.err != nil {
		a.cancel()
		return nil, a.err
	}
	a.resp.Body = cancelOnClose{ReadCloser: a.resp.Body, cancel: a.cancel}
	return a.resp, nil
}

// giveUp logs that the request is given up after attempt a, worth another
// one that may not be sent, and returns what RoundTrip returns then: an
// error that says why and after how many attempts, or the last answer.
func (t *retrying) giveUp(req *http.Request, a attempt, start time.Time) (*http.Response, error) {
	t.log.WithFields(logrus.Fields{"method": req.Method, "path": req.URL.Path, "attempts": a.n,
		"elapsed": time.Since(start).Round(time.Millisecond).String(), "reason": a.reason}).Warn("giving up on a request to the apiserver")
	if a.err != nil {
		a.cancel()
		return nil, &requestError{attempts: a.n, elapsed: time.Since(start), reason: a.reason}
	}
	// This transport has retried what it retries; without the header,
	// client-go does not retry the same answer again on top of it.
	a.resp.Header.Del("Retry-After")
	a.resp.Body = cancelOnClose{ReadCloser: a.resp.Body, cancel: a.cancel}
	return a.resp, nil
}

// discard reads what is left of an answer that will be retried (up to a
// bound) and closes it, so that its connection serves again, and ends the
// attempt's context.
func (a attempt) discard() {
	if a.resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(a.resp.Body, 64<<10))
		a.resp.Body.Close()
	}
	a.cancel()
}

// wait waits delay before a retry, then for a token of the limiter; an
// error when the call ends first.
func (t *retrying) wait(ctx context.Context, delay time.Duration) error {
	if err := sleep(ctx, delay); err != nil {
		return err
	}
	return t.limiter.Wait(ctx)
}

// retryable says why an attempt's outcome is worth another attempt ("" if it
// is not) and how long the apiserver asked to wait.
func (t *retrying) retryable(ctx, actx context.Context, resp *http.Response, err error) (string, time.Duration) {
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return "", 0 // the call is over
		case actx.Err() != nil:
			return fmt.Sprintf("no answer within %s", t.policy.Timeout), 0
		case isCertificateError(err):
			return "", 0
		}
		return describeNetError(err), 0
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return "429 Too Many Requests", retryAfter(resp, time.Now())
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return resp.Status, retryAfter(resp, time.Now())
	}
	return "", 0
}

// fits says whether waiting d still leaves the call time for an attempt.
func fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func isWatch(req *http.Request) bool {
	if strings.Contains(req.URL.Path, "/watch/") {
		return true
	}
	if !strings.Contains(req.URL.RawQuery, "watch=") {
		return false
	}
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// repeatable marks a request's context as safe to send again (SafeToRepeat).
type repeatable struct{}

// SafeToRepeat marks the requests sent with ctx as safe to send again: the
// writer that builds a write knows whether a second attempt could do
// anything twice (package ssa marks its applies, which carry their
// resourceVersion or are not forced, and its release, a JSON patch that
// tests first); the transport does not read the body to guess. A Request
// built by hand says so in its field Repeatable, which Send marks here.
func SafeToRepeat(ctx context.Context) context.Context {
	return context.WithValue(ctx, repeatable{}, true)
}

// safeToRepeat says whether sending the request again cannot do anything
// twice: reads, access reviews (which store nothing), and what its writer
// marked (SafeToRepeat) and can be sent again (its body can be read again).
func safeToRepeat(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		return true
	case http.MethodPost:
		if strings.HasPrefix(req.URL.Path, "/apis/authorization.k8s.io/") {
			return true
		}
	}
	marked, _ := req.Context().Value(repeatable{}).(bool)
	return marked && (req.Body == nil || req.GetBody != nil)
}

// retryAfter is the wait an answer asks for in its Retry-After header: a
// number of seconds, or an HTTP date (RFC 9110 section 10.2.3) counted from
// now. It is 0 when the header is absent, unreadable or in the past.
func retryAfter(resp *http.Response, now time.Time) time.Duration {
	h := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if s, err := strconv.Atoi(h); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if at, err := http.ParseTime(h); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

func isCertificateError(err error) bool {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify)
}

// describeNetError names a failed attempt in words that client-go does not
// take for a connection reset (it would retry a GET ten more times on top).
func describeNetError(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		return "the connection closed before an answer"
	}
	msg := err.Error()
	for _, s := range []string{"connection reset by peer", "use of closed network connection", "EOF"} {
		msg = strings.ReplaceAll(msg, s, "connection closed")
	}
	return msg
}

// requestError is a request that got no usable answer in every attempt it
// was given.
type requestError struct {
	attempts int
	elapsed  time.Duration
	reason   string
}

// Reason is the Event reason of the error (package events).
func (e *requestError) Reason() string { return "ApiserverUnavailable" }

func (e *requestError) Error() string {
	if e.attempts == 1 {
		return fmt.Sprintf("the apiserver did not answer: %s", e.reason)
	}
	return fmt.Sprintf("the apiserver did not answer in %d attempts over %s (last: %s)", e.attempts, e.elapsed.Round(time.Millisecond), e.reason)
}

// Timeout says whether the last attempt went unanswered for its whole timeout.
func (e *requestError) Timeout() bool { return strings.HasPrefix(e.reason, "no answer within") }

// cancelOnClose ends an attempt's context when the caller is done with the
// answer's body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
