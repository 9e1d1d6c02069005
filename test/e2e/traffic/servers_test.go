package traffic

import (
	"context"
	"net"
	"testing"
	"time"
)

// serveOnLoopback runs a backend of proto on a free port of 127.0.0.1.
func serveOnLoopback(t *testing.T, proto Protocol, name, host string) (string, *server) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := startServer(l, proto, name, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return l.Addr().String(), s
}

func TestEveryProtocolAnswersWithItsName(t *testing.T) {
	m, err := NewMeter("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, proto := range []Protocol{HTTP, GRPC, TCP, TLS} {
		t.Run(string(proto), func(t *testing.T) {
			addr, _ := serveOnLoopback(t, proto, "svc-"+string(proto), "tls.example.com")
			h := m.Do(context.Background(), Request{Host: "tls.example.com", Protocol: proto, Entrypoint: addr,
				Header: map[string]string{"X-Canary": "yes"}})
			if h.Status != 200 || h.Backend != "svc-"+string(proto) {
				t.Fatalf("%s: got %+v, want 200 from svc-%s", proto, h, proto)
			}
		})
	}
}

func TestMeterSendsOnlyToLoopback(t *testing.T) {
	m, err := NewMeter("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if h := m.Do(context.Background(), Request{Protocol: TCP, Entrypoint: "10.0.0.1:80"}); h.Status != 0 {
		t.Fatalf("a request to 10.0.0.1 was sent: %+v", h)
	}
}

// A backend that goes away ends its conversations; each is counted once,
// with the message in flight (if any) as lost, and is opened again.
func TestLongLivedCountsWhatEnds(t *testing.T) {
	for _, proto := range []Protocol{TCP, GRPC} {
		t.Run(string(proto), func(t *testing.T) {
			addr, srv := serveOnLoopback(t, proto, "old", "")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := OpenLongLived(ctx, proto, addr, "grpc.example.com", 5, 20*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			time.Sleep(200 * time.Millisecond)
			if s := l.Snapshot(); s.OpenOn["old"] != 5 || len(s.Ended) != 0 || s.Lost != 0 || s.Echoed < 25 {
				t.Fatalf("before the backend stops: %s; want 5 open on old, none ended, at least 25 echoes", s)
			}
			srv.stop()
			deadline := time.Now().Add(5 * time.Second)
			for len(l.Snapshot().Ended) < 5 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			s := l.Snapshot()
			if len(s.Ended) != 5 || s.EndedOn()["old"] != 5 || s.Open() != 0 || s.Lost > 5 {
				t.Fatalf("after the backend stopped: %s; want 5 ended on old, none open, at most 5 lost", s)
			}
		})
	}
}
