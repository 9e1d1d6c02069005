package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/sirupsen/logrus"
)

// servePprof serves Go's profiles on addr, which must be 127.0.0.1 or ::1: the
// profiles show the plugin's memory, requests included, so they are never
// offered beyond the machine. It is for measuring (make bench); off unless
// -pprof-addr is given.
func servePprof(addr string, log *logrus.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !(ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)) {
		return fmt.Errorf("%q is not a loopback address: use 127.0.0.1:PORT", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	log.WithField("address", ln.Addr().String()).Info("serving pprof profiles")
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}
