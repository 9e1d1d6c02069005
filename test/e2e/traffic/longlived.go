package traffic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// MaxConversations bounds the conversations of one LongLived.
const MaxConversations = 200

// LongLived keeps n conversations open through the gateway, each a TCP
// connection (TCP) or a bidirectional gRPC stream (GRPC, all on one h2c
// connection to the gateway), and exchanges one numbered message on each of
// them every period: a message sent and its echo read back, prefixed with the
// name of the backend that answered. A conversation that ends (the
// connection closed or reset, the stream failed) is recorded with its
// backend, and a new one is opened in its place (a client reconnecting), so
// the set stays at n.
type LongLived struct {
	proto  Protocol
	ap     netip.AddrPort
	host   string
	period time.Duration
	cc     *grpc.ClientConn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	convs   []*conversation
	ended   []Ended
	opened  int
	refused int
	sent    int
	echoed  int
	lost    int
	maxGap  time.Duration
	last    map[string]time.Time // per backend: the last echo
}

// conversation is one of the n slots: its current connection or stream.
type conversation struct {
	backend string // "" while (re)connecting
	since   time.Time
	echoes  int
}

// Ended is a conversation that ended while the test kept it open.
type Ended struct {
	At      time.Time
	Backend string
	// Echoes is how many messages it exchanged; Lost is 1 when a message
	// had been sent and no echo came.
	Echoes, Lost int
	Err          string
}

// OpenLongLived opens n conversations to entrypoint (loopback only) with
// proto (TCP or GRPC; host is the gRPC authority) and starts exchanging a
// message on each every period. It returns once all n have answered once
// (or an error, after closing them).
func OpenLongLived(ctx context.Context, proto Protocol, entrypoint, host string, n int, period time.Duration) (*LongLived, error) {
	ap, err := netip.ParseAddrPort(entrypoint)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("entrypoint %q is not a loopback address", entrypoint)
	}
	if n <= 0 || n > MaxConversations || (proto != TCP && proto != GRPC) {
		return nil, fmt.Errorf("%d %s conversations: want 1..%d, TCP or GRPC", n, proto, MaxConversations)
	}
	l := &LongLived{proto: proto, ap: ap, host: host, period: period, last: map[string]time.Time{}}
	if proto == GRPC {
		if l.cc, err = dialGRPC(ap, host); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for i := range n {
		l.convs = append(l.convs, &conversation{})
		l.wg.Add(1)
		go l.run(runCtx, i)
	}
	for {
		if l.Snapshot().Open() == n {
			return l, nil
		}
		select {
		case <-ctx.Done():
			l.Close()
			return nil, fmt.Errorf("opening %d %s conversations through %s: %w (%s)", n, proto, entrypoint, ctx.Err(), l.Snapshot())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// exchange is one open connection or stream: send writes message seq, recv
// reads an echo and returns the backend's name and the number it echoed.
type exchange struct {
	send  func(seq int) error
	recv  func() (backend string, seq int, err error)
	close func()
}

func (l *LongLived) run(ctx context.Context, i int) {
	defer l.wg.Done()
	for ctx.Err() == nil {
		ex, err := l.open(ctx)
		if err != nil {
			l.mu.Lock()
			l.refused++
			l.mu.Unlock()
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		l.converse(ctx, i, ex)
		ex.close()
		sleep(ctx, 50*time.Millisecond) // a client's pause before it reconnects
	}
}

// converse exchanges a message every period until the conversation ends or
// ctx does. An echo must come within 5 s.
func (l *LongLived) converse(ctx context.Context, i int, ex exchange) {
	l.mu.Lock()
	l.opened++
	l.mu.Unlock()
	answers := make(chan echo)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			b, seq, err := ex.recv()
			select {
			case answers <- echo{b, seq, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	ticker := time.NewTicker(l.period)
	defer ticker.Stop()
	var backend string
	var lastEcho time.Time
	for seq := 1; ; seq++ {
		if err := ex.send(seq); err != nil {
			l.end(ctx, i, backend, 0, err)
			return
		}
		l.mu.Lock()
		l.sent++
		l.mu.Unlock()
		var a echo
		select {
		case a = <-answers:
		case <-time.After(5 * time.Second):
			a.err = errors.New("no echo within 5s")
		case <-ctx.Done():
			l.forget(1) // cut off by Close: not lost
			return
		}
		if a.err == nil && (a.seq != seq || (backend != "" && a.backend != backend)) {
			a.err = fmt.Errorf("echo %q %d for message %d (backend %q)", a.backend, a.seq, seq, backend)
		}
		if a.err != nil {
			if ctx.Err() != nil {
				l.forget(1)
				return
			}
			l.end(ctx, i, backend, 1, a.err)
			return
		}
		now := time.Now()
		l.mu.Lock()
		backend = a.backend
		l.echoed++
		if !lastEcho.IsZero() {
			l.maxGap = max(l.maxGap, now.Sub(lastEcho))
		}
		lastEcho = now
		c := l.convs[i]
		if c.backend == "" {
			c.backend, c.since, c.echoes = backend, now, 0
		}
		c.echoes++
		l.last[backend] = now
		l.mu.Unlock()
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
	}
}

type echo struct {
	backend string
	seq     int
	err     error
}

// end records conversation i's end (unless the test is closing it).
func (l *LongLived) end(ctx context.Context, i int, backend string, lost int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.convs[i]
	if ctx.Err() != nil {
		l.sent -= lost
		*c = conversation{}
		return
	}
	l.lost += lost
	l.ended = append(l.ended, Ended{At: time.Now(), Backend: backend, Echoes: c.echoes, Lost: lost, Err: describeEnd(err)})
	*c = conversation{}
}

// forget takes back messages that the test's own Close cut off.
func (l *LongLived) forget(n int) {
	l.mu.Lock()
	l.sent -= n
	l.mu.Unlock()
}

// describeEnd names how a conversation ended: closed by the other side
// (EOF), reset, or the error itself.
func describeEnd(err error) string {
	switch {
	case errors.Is(err, io.EOF):
		return "closed (EOF)"
	case err != nil && strings.Contains(err.Error(), "connection reset"):
		return "reset"
	case err != nil:
		return err.Error()
	}
	return ""
}

func (l *LongLived) open(ctx context.Context) (exchange, error) {
	if l.proto == GRPC {
		stream, err := testgrpc.NewTestServiceClient(l.cc).FullDuplexCall(ctx)
		if err != nil {
			return exchange{}, err
		}
		return exchange{
			send: func(seq int) error {
				return stream.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(strconv.Itoa(seq))}})
			},
			recv: func() (string, int, error) {
				m, err := stream.Recv()
				if err != nil {
					return "", 0, err
				}
				return parseEcho(string(m.GetPayload().GetBody()))
			},
			close: func() { _ = stream.CloseSend() },
		}, nil
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", l.ap.String())
	if err != nil {
		return exchange{}, err
	}
	r := bufio.NewReader(c)
	return exchange{
		send: func(seq int) error {
			_, err := io.WriteString(c, strconv.Itoa(seq)+"\n")
			return err
		},
		recv: func() (string, int, error) {
			line, err := r.ReadString('\n')
			if err != nil {
				return "", 0, err
			}
			return parseEcho(strings.TrimSuffix(line, "\n"))
		},
		close: func() { c.Close() },
	}, nil
}

// parseEcho reads "<backend> <seq>".
func parseEcho(s string) (string, int, error) {
	name, num, ok := strings.Cut(s, " ")
	seq, err := strconv.Atoi(num)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("not an echo: %q", s)
	}
	return name, seq, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Close ends every conversation (not counted as ended) and waits for them.
func (l *LongLived) Close() {
	l.cancel()
	l.wg.Wait()
	if l.cc != nil {
		l.cc.Close()
	}
}

// LongLivedState is what a LongLived went through so far.
type LongLivedState struct {
	// OpenOn counts the open conversations per backend.
	OpenOn map[string]int
	// Opened counts the connections or streams opened in all (the n of the
	// start, then every one that replaced an ended one); Refused the
	// attempts that failed.
	Opened, Refused int
	// Ended lists the conversations that ended while the test kept them.
	Ended []Ended
	// Sent, Echoed and Lost count messages: sent, echoed back, and sent on
	// a conversation that ended before its echo came.
	Sent, Echoed, Lost int
	// MaxGap is the longest time between two echoes on one conversation.
	MaxGap time.Duration
	// LastEcho is, per backend, when it last echoed a message.
	LastEcho map[string]time.Time
}

// Snapshot is the state now.
func (l *LongLived) Snapshot() LongLivedState {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := LongLivedState{OpenOn: map[string]int{}, Opened: l.opened, Refused: l.refused, Ended: slices.Clone(l.ended),
		Sent: l.sent, Echoed: l.echoed, Lost: l.lost, MaxGap: l.maxGap, LastEcho: maps.Clone(l.last)}
	for _, c := range l.convs {
		if c.backend != "" {
			s.OpenOn[c.backend]++
		}
	}
	return s
}

// Open is how many conversations are open (have echoed on their current
// connection or stream).
func (s LongLivedState) Open() int {
	n := 0
	for _, v := range s.OpenOn {
		n += v
	}
	return n
}

// EndedOn counts the ended conversations per backend.
func (s LongLivedState) EndedOn() map[string]int {
	out := map[string]int{}
	for _, e := range s.Ended {
		out[e.Backend]++
	}
	return out
}

func (s LongLivedState) String() string {
	var open []string
	for _, b := range slices.Sorted(maps.Keys(s.OpenOn)) {
		open = append(open, fmt.Sprintf("%s %d", b, s.OpenOn[b]))
	}
	var ended []string
	byBackend := s.EndedOn()
	for _, b := range slices.Sorted(maps.Keys(byBackend)) {
		ended = append(ended, fmt.Sprintf("%s %d", b, byBackend[b]))
	}
	return fmt.Sprintf("open %d (%s), ended %d (%s), opened %d, refused %d; messages sent %d, echoed %d, lost %d; longest gap between echoes %s",
		s.Open(), strings.Join(open, ", "), len(s.Ended), strings.Join(ended, ", "), s.Opened, s.Refused,
		s.Sent, s.Echoed, s.Lost, s.MaxGap.Round(time.Millisecond))
}
