package traffic

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// Protocol is what a backend speaks, and so what a Request sends through the
// gateway: the kind of route that carries it.
type Protocol string

const (
	// HTTP is an HTTP/1.1 server (HTTPRoute): every request gets 200 and the
	// backend's name in BackendHeader.
	HTTP Protocol = ""
	// GRPC is a gRPC server over h2c (GRPCRoute): grpc.testing.TestService,
	// whose UnaryCall answers with the backend's name in the BackendHeader
	// metadata, and whose FullDuplexCall echoes every message prefixed with it.
	GRPC Protocol = "grpc"
	// TCP is a line echo server (TCPRoute): every line it reads it sends back
	// prefixed with the backend's name and a space.
	TCP Protocol = "tcp"
	// TLS is that echo server behind TLS (TLSRoute, passthrough): the gateway
	// routes by SNI without terminating, so the answer proves the session
	// reached the backend.
	TLS Protocol = "tls"
)

// grpcBackendKey is BackendHeader as gRPC metadata (lower case).
var grpcBackendKey = strings.ToLower(BackendHeader)

// server is one running backend; stop ends it and every connection it holds.
type server struct {
	stop func()
}

// startServer serves proto on l, answering as name; host is the TLS
// certificate's name (TLS only).
func startServer(l net.Listener, proto Protocol, name, host string) (*server, error) {
	switch proto {
	case GRPC:
		s := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(s, &grpcBackend{name: name})
		go func() { _ = s.Serve(l) }()
		return &server{stop: s.Stop}, nil
	case TCP, TLS:
		if proto == TLS {
			cert, err := selfSigned(host)
			if err != nil {
				l.Close()
				return nil, err
			}
			l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		}
		e := &echoServer{name: name, l: l, conns: map[net.Conn]bool{}}
		go e.serve()
		return &server{stop: e.close}, nil
	default:
		srv := &http.Server{Handler: answer(name), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		return &server{stop: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
			}
		}}, nil
	}
}

// echoServer answers every line with its name, a space and the line.
type echoServer struct {
	name  string
	l     net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
	done  bool
}

func (e *echoServer) serve() {
	for {
		c, err := e.l.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		if e.done {
			e.mu.Unlock()
			c.Close()
			return
		}
		e.conns[c] = true
		e.mu.Unlock()
		go e.echo(c)
	}
}

func (e *echoServer) echo(c net.Conn) {
	defer func() {
		c.Close()
		e.mu.Lock()
		delete(e.conns, c)
		e.mu.Unlock()
	}()
	r := bufio.NewReader(c)
	prefix := []byte(e.name + " ")
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		if _, err := c.Write(append(append([]byte(nil), prefix...), line...)); err != nil {
			return
		}
	}
}

// close stops accepting and closes every open connection, as a process
// that goes away does.
func (e *echoServer) close() {
	e.mu.Lock()
	e.done = true
	conns := make([]net.Conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	e.l.Close()
	for _, c := range conns {
		c.Close()
	}
}

// grpcBackend is grpc.testing.TestService answering as name.
type grpcBackend struct {
	testgrpc.UnimplementedTestServiceServer
	name string
}

func (g *grpcBackend) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if err := grpc.SetHeader(ctx, metadata.Pairs(grpcBackendKey, g.name)); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: []byte(g.name)}, ServerId: g.name}, nil
}

func (g *grpcBackend) FullDuplexCall(stream grpc.BidiStreamingServer[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]) error {
	if err := stream.SendHeader(metadata.Pairs(grpcBackendKey, g.name)); err != nil {
		return err
	}
	for {
		in, err := stream.Recv()
		if err != nil {
			return err
		}
		body := append([]byte(g.name+" "), in.GetPayload().GetBody()...)
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: body}}); err != nil {
			return err
		}
	}
}

// selfSigned is a certificate for host, made for one test run.
func selfSigned(host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
