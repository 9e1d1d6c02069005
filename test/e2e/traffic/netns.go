package traffic

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Netns is a network namespace of the test's own, joined to the host by one
// veth pair: the host end has the subnet's first address, and every backend
// gets an address of its own on the namespace end. Nothing else is routed
// there, so requests to those addresses stay on this machine.
type Netns struct {
	// Name is the namespace's name for `ip netns` (rgs-<pid>).
	Name string
	// Subnet is the veth pair's /24; Host is the host end's address.
	Subnet netip.Prefix
	Host   netip.Addr

	hostIf, nsIf string
	mu           sync.Mutex
	next         netip.Addr
	closed       bool
}

const (
	netnsPrefix = "rgs-"
	// subnetBase is where CreateNetns looks for a free /24: 10.213.0.0/16.
	subnetBase = "10.213.0.0"
)

// CreateNetns creates the process's network namespace, rgs-<pid>, with a veth pair,
// on a /24 of 10.213.0.0/16 that no interface or route of the machine uses.
// It needs root (CAP_NET_ADMIN). Namespaces left behind by a test process
// that no longer runs (killed with SIGKILL) are deleted first. Close removes
// everything.
func CreateNetns() (*Netns, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the data plane needs root: its backends live in a network namespace the test creates (ip netns, a veth pair)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("the data plane needs the ip command (iproute2): %w", err)
	}
	// Two runs choosing a subnet at once would choose the same one.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "rollouts-gatewayapi-ssa-netns.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	removeStale()

	pid := os.Getpid()
	n := &Netns{Name: netnsPrefix + strconv.Itoa(pid), hostIf: fmt.Sprintf("rgs%dh", pid), nsIf: fmt.Sprintf("rgs%dn", pid)}
	if n.Subnet, err = freeSubnet(pid); err != nil {
		return nil, err
	}
	n.Host = n.Subnet.Addr().Next()
	n.next = n.Host.Next()
	steps := [][]string{
		{"netns", "add", n.Name},
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", n.nsIf, "netns", n.Name},
		{"addr", "add", netip.PrefixFrom(n.Host, 24).String(), "dev", n.hostIf},
		{"-n", n.Name, "link", "set", "lo", "up"},
		{"-n", n.Name, "link", "set", n.nsIf, "up"},
		{"link", "set", n.hostIf, "up"},
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			return nil, errors.Join(err, n.Close())
		}
	}
	// No IPv6 on either end: nothing but the test's IPv4 traffic on the link.
	if err := n.disableIPv6(); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func (n *Netns) disableIPv6() error {
	host := filepath.Join("/proc/sys/net/ipv6/conf", n.hostIf, "disable_ipv6")
	if _, err := os.Stat(host); errors.Is(err, os.ErrNotExist) {
		return nil // no IPv6 on this machine at all
	}
	if err := os.WriteFile(host, []byte("1"), 0o644); err != nil {
		return err
	}
	return n.inside(func() error {
		for _, f := range []string{"all", "default", "lo", n.nsIf} {
			if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv6/conf", f, "disable_ipv6"), []byte("1"), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
}

// freeSubnet picks a /24 of 10.213.0.0/16, starting from one derived from
// pid, that overlaps no address and no route of the machine.
func freeSubnet(pid int) (netip.Prefix, error) {
	used, err := usedPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	base := netip.MustParseAddr(subnetBase).As4()
	for i := range 256 {
		third := byte((pid + i) % 256)
		candidate := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], third, 0}), 24)
		free := true
		for _, u := range used {
			if u.Overlaps(candidate) {
				free = false
				break
			}
		}
		if free {
			return candidate, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free /24 in %s/16 for the test's network namespace", subnetBase)
}

// usedPrefixes are the machine's interface subnets and IPv4 routes (the
// default route excepted: it overlaps everything).
func usedPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			out = append(out, p.Masked())
		}
	}
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -4 route: %w", err)
	}
	for _, line := range strings.Split(string(routes), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		dst := fields[0]
		if dst == "local" || dst == "broadcast" || dst == "unicast" {
			if len(fields) < 2 {
				continue
			}
			dst = fields[1]
		}
		if dst == "default" {
			continue
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// removeStale deletes the namespaces rgs-<pid> of test processes that no
// longer run (a test killed outright cannot clean up after itself), and one
// named after this process (left by an earlier process with the same pid:
// a process creates one namespace only).
func removeStale() {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), netnsPrefix))
		if !strings.HasPrefix(e.Name(), netnsPrefix) || err != nil {
			continue
		}
		if pid == os.Getpid() || syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = ip("netns", "del", e.Name())
		}
	}
}

// NewAddress adds the next free address of the subnet to the namespace's
// end of the veth pair.
func (n *Netns) NewAddress() (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return netip.Addr{}, errors.New("the network namespace is gone")
	}
	a := n.next
	if !n.Subnet.Contains(a) || a.As4()[3] == 255 {
		return netip.Addr{}, fmt.Errorf("no free address left in %s", n.Subnet)
	}
	if err := ip("-n", n.Name, "addr", "add", netip.PrefixFrom(a, 24).String(), "dev", n.nsIf); err != nil {
		return netip.Addr{}, err
	}
	n.next = a.Next()
	return a, nil
}

// Listen opens a TCP listener inside the namespace: the socket belongs to
// the namespace it was created in, whichever thread serves it later.
func (n *Netns) Listen(addr netip.AddrPort) (net.Listener, error) {
	if !n.Subnet.Contains(addr.Addr()) {
		return nil, fmt.Errorf("%s is not in the namespace's subnet %s", addr, n.Subnet)
	}
	var l net.Listener
	err := n.inside(func() error {
		var err error
		l, err = net.Listen("tcp4", addr.String())
		return err
	})
	return l, err
}

// inside runs f on an OS thread that has joined the namespace. The thread
// goes back to the host's namespace afterwards; if it cannot, it is left
// locked, and the runtime ends it with its goroutine.
func (n *Netns) inside(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		host, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer host.Close()
		target, err := os.Open(filepath.Join("/run/netns", n.Name))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("joining network namespace %s: %w", n.Name, err)
			return
		}
		ferr := f()
		if err := setns(host); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leaving network namespace %s: %w", n.Name, err))
			return // the thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func setns(f *os.File) error {
	if _, _, errno := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0); errno != 0 {
		return errno
	}
	return nil
}

// Close deletes the namespace, which removes both ends of the veth pair and
// every address in it. Safe to call more than once.
func (n *Netns) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if _, err := os.Stat(filepath.Join("/run/netns", n.Name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return ip("netns", "del", n.Name)
}

// lockFile takes an exclusive flock on path; the returned function releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
