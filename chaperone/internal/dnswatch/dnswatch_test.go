package dnswatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/dnstest"
)

// start runs a Watcher of srv with a 200 ms floor until the test ends. The
// pod's own addresses are none unless cfg.OwnAddrs says otherwise.
func start(t *testing.T, srv *dnstest.Server, cfg Config) (*Watcher, *atomic.Int32) {
	t.Helper()
	cfg.Servers = []string{srv.Addr()}
	if cfg.MinTTL == 0 {
		cfg.MinTTL = 200 * time.Millisecond
	}
	cfg.Timeout = 300 * time.Millisecond
	if cfg.OwnAddrs == nil {
		// The answers are documentation addresses, which a test machine
		// may have (one has 192.0.2.2 on eth0): the machine's own
		// addresses are refused only in TestWatcherRefusesOwnAddresses.
		cfg.OwnAddrs = func() ([]netip.Addr, error) { return nil, nil }
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var changes atomic.Int32
	go func() { w.Run(ctx, func() { changes.Add(1) }); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, &changes
}

// waitAddrs waits until name's addresses are want (space separated).
func waitAddrs(t *testing.T, w *Watcher, name, want string) {
	t.Helper()
	var got string
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		got = addrs(w, name)
		if got == want {
			return
		}
	}
	t.Fatalf("addresses of %s = %q, want %q", name, got, want)
}

func addrs(w *Watcher, name string) string {
	var s []string
	for _, a := range w.Addrs()[name] {
		s = append(s, a.String())
	}
	return strings.Join(s, " ")
}

func waitPending(t *testing.T, w *Watcher) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); w.Pending(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the first lookup did not finish")
		}
	}
}

func TestWatcherAnswers(t *testing.T) {
	srv := dnstest.Start(t)
	srv.SetAddrs("v4v6.test", 60, "192.0.2.2", "2001:db8::1", "192.0.2.1", "192.0.2.1")
	srv.SetCNAME("alias.test", "mid.test", 60)
	srv.SetCNAME("mid.test", "v4v6.test", 60)
	srv.SetAddrs("metadata.test", 60, "169.254.169.254", "127.0.0.1", "::1", "fe80::1", "192.0.2.9", "::ffff:127.0.0.2",
		"100.100.100.200", "168.63.129.16", "64:ff9b::a9fe:a9fe")
	srv.SetAddrs("only-refused.test", 60, "169.254.169.254")
	srv.SetRcode("gone.test", dns.RcodeNameError)
	srv.SetRcode("broken.test", dns.RcodeServerFailure)
	srv.SetAddrs("v6only.test", 60, "2001:db8::6")
	tests := []struct {
		name, want string
		chase      bool
	}{
		{"v4v6.test", "192.0.2.1 192.0.2.2 2001:db8::1", true},
		{"V4V6.test.", "192.0.2.1 192.0.2.2 2001:db8::1", true},
		{"alias.test", "192.0.2.1 192.0.2.2 2001:db8::1", true},
		// a server that stops at the CNAME: the watcher asks for the target
		{"alias.test", "192.0.2.1 192.0.2.2 2001:db8::1", false},
		{"metadata.test", "192.0.2.9", true},
		{"only-refused.test", "", true},
		{"gone.test", "", true},
		{"broken.test", "", true},
		{"v6only.test", "2001:db8::6", true},
		{"missing.test", "", true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s chase=%v", tc.name, tc.chase), func(t *testing.T) {
			srv.ChaseCNAMEs(tc.chase)
			w, changes := start(t, srv, Config{})
			w.Want([]string{tc.name})
			waitPending(t, w)
			key := strings.TrimSuffix(strings.ToLower(tc.name), ".")
			if got := addrs(w, key); got != tc.want {
				t.Errorf("addresses = %q, want %q", got, tc.want)
			}
			if n := changes.Load(); n != 1 {
				t.Errorf("changed called %d times after the first lookup, want 1", n)
			}
			result := "ok"
			if tc.want == "" {
				result = "error"
			}
			if n := testutil.ToFloat64(w.metrics.lookups.WithLabelValues(key, result)); n < 1 {
				t.Errorf("varnishgw_dns_lookups_total{result=%q} = %v, want at least 1", result, n)
			}
		})
	}
	srv.ChaseCNAMEs(true)
	w, _ := start(t, srv, Config{})
	w.Want([]string{"metadata.test"})
	waitPending(t, w)
	if n := testutil.ToFloat64(w.metrics.refused.WithLabelValues("metadata.test")); n != 8 {
		t.Errorf("refused addresses = %v, want 8", n)
	}
}

// TestWatcherRefusesOwnAddresses: by default a name that resolves to an
// address of one of this machine's network interfaces (a pod's own IP,
// where its health and listener ports are) is refused, as loopback is.
func TestWatcherRefusesOwnAddresses(t *testing.T) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, a := range ifaddrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			own = append(own, n.IP.String())
		}
	}
	if len(own) == 0 {
		t.Fatalf("no interface address outside loopback and link-local among %v: the test needs one", ifaddrs)
	}
	t.Logf("this machine's addresses: %v", own)
	srv := dnstest.Start(t)
	srv.SetAddrs("self.test", 60, append([]string{"192.0.2.7"}, own...)...)
	w, _ := start(t, srv, Config{OwnAddrs: InterfaceAddrs})
	w.Want([]string{"self.test"})
	waitPending(t, w)
	if got := addrs(w, "self.test"); got != "192.0.2.7" {
		t.Errorf("addresses = %q, want 192.0.2.7 only: the machine's own addresses %v are refused", got, own)
	}
	if n := testutil.ToFloat64(w.metrics.refused.WithLabelValues("self.test")); n != float64(len(own)) {
		t.Errorf("refused addresses = %v, want %d", n, len(own))
	}
}

// TestWatcherFollowsTTL: a changed record is picked up after its TTL, a
// failed or invalid answer keeps the last good addresses, and a forgotten
// name loses them.
func TestWatcherFollowsTTL(t *testing.T) {
	srv := dnstest.Start(t)
	srv.SetAddrs("app.test", 1, "192.0.2.1")
	w, changes := start(t, srv, Config{MinTTL: 500 * time.Millisecond, MaxTTL: 30 * time.Second})
	w.Want([]string{"app.test"})
	waitAddrs(t, w, "app.test", "192.0.2.1")

	moved := time.Now()
	srv.SetAddrs("app.test", 1, "192.0.2.2", "192.0.2.3")
	waitAddrs(t, w, "app.test", "192.0.2.2 192.0.2.3")
	if d := time.Since(moved); d > 4*time.Second {
		t.Errorf("the new addresses took %s, more than the 1 s TTL and a lookup (the ceiling is 30 s)", d)
	}
	before := changes.Load()

	// invalid answers never replace working addresses
	for _, bad := range []func(){
		func() { srv.SetRcode("app.test", dns.RcodeNameError) },
		func() { srv.SetRcode("app.test", dns.RcodeServerFailure) },
		func() { srv.SetAddrs("app.test", 1, "169.254.169.254") },
		func() { srv.SetAddrs("app.test", 1) },
	} {
		errs := testutil.ToFloat64(w.metrics.lookups.WithLabelValues("app.test", "error"))
		bad()
		for end := time.Now().Add(5 * time.Second); testutil.ToFloat64(w.metrics.lookups.WithLabelValues("app.test", "error")) < errs+2; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("no failed lookup counted")
			}
		}
		if got := addrs(w, "app.test"); got != "192.0.2.2 192.0.2.3" {
			t.Fatalf("addresses after a bad answer = %q, want the last good ones", got)
		}
	}
	// the server stops: lookups time out, the addresses stay
	srv.Stop()
	errs := testutil.ToFloat64(w.metrics.lookups.WithLabelValues("app.test", "error"))
	time.Sleep(2 * time.Second)
	if n := testutil.ToFloat64(w.metrics.lookups.WithLabelValues("app.test", "error")); n <= errs {
		t.Errorf("no failed lookup counted while the server is down")
	}
	if got := addrs(w, "app.test"); got != "192.0.2.2 192.0.2.3" {
		t.Errorf("addresses with the server down = %q, want the last good ones", got)
	}
	if n := changes.Load(); n != before {
		t.Errorf("changed called %d times by failed lookups", n-before)
	}
	w.Want(nil)
	if got := w.Addrs(); len(got) != 0 {
		t.Errorf("addresses of forgotten names = %v", got)
	}
}

// TestWatcherTTLBounds: the time between lookups is the TTL within
// MinTTL and MaxTTL.
func TestWatcherTTLBounds(t *testing.T) {
	srv := dnstest.Start(t)
	srv.SetAddrs("zero.test", 0, "192.0.2.1")
	srv.SetAddrs("long.test", 3600, "192.0.2.1")
	w, _ := start(t, srv, Config{MinTTL: 300 * time.Millisecond, MaxTTL: time.Second})
	w.Want([]string{"zero.test", "long.test"})
	waitPending(t, w)
	time.Sleep(2500 * time.Millisecond)
	// Over 2.5 s zero.test is looked up every MinTTL (about 9 times),
	// long.test every MaxTTL (3 times); a loaded machine may delay some.
	zero := testutil.ToFloat64(w.metrics.lookups.WithLabelValues("zero.test", "ok"))
	long := testutil.ToFloat64(w.metrics.lookups.WithLabelValues("long.test", "ok"))
	if zero < 4 || zero > 10 {
		t.Errorf("zero.test looked up %v times in 2.5 s, want about 9 (every MinTTL of 300 ms)", zero)
	}
	if long < 2 || long > 3 {
		t.Errorf("long.test looked up %v times in 2.5 s, want 3 (every MaxTTL of 1 s, not its TTL of an hour)", long)
	}
}

func TestNewConfig(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(conf, []byte("search svc.cluster.local\nnameserver 10.96.0.10\nnameserver fd00::10\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{ResolvConf: conf})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.Servers(), " "); got != "10.96.0.10:53 [fd00::10]:53" {
		t.Errorf("servers from resolv.conf = %s", got)
	}
	empty := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(empty, []byte("search x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{ResolvConf: filepath.Join(dir, "missing")}, "name one with --dns-server"},
		{Config{ResolvConf: empty}, "names no nameserver"},
		{Config{Servers: []string{"10.0.0.1"}}, `DNS server "10.0.0.1" is not host:port`},
		{Config{Servers: []string{"10.0.0.1:53"}, MinTTL: time.Minute, MaxTTL: time.Second}, "MaxTTL 1s is below MinTTL 1m0s"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
	r, err := ParseRefuse([]string{"10.0.0.1", "10.1.2.3/8", "fe80::/10", "self"})
	if err != nil || fmt.Sprint(r.Prefixes) != "[10.0.0.1/32 10.0.0.0/8 fe80::/10]" || !r.Self {
		t.Errorf("ParseRefuse = %+v, %v", r, err)
	}
	if r, err := ParseRefuse(nil); err != nil || len(r.Prefixes) != 0 || r.Self {
		t.Errorf("ParseRefuse(nil) = %+v, %v; want a list that refuses nothing", r, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "pod", "Self"} {
		if _, err := ParseRefuse([]string{bad}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`%q is not an address prefix such as 169.254.0.0/16, an address, or "self"`, bad)) {
			t.Errorf("ParseRefuse(%s) = %v", bad, err)
		}
	}
}

// TestWatcherOwnAddrsFail: when the pod's own addresses cannot be read, a
// lookup fails (keeping the last good addresses) rather than using an
// address that may be the pod's.
func TestWatcherOwnAddrsFail(t *testing.T) {
	srv := dnstest.Start(t)
	srv.SetAddrs("any.test", 60, "192.0.2.9")
	w, _ := start(t, srv, Config{OwnAddrs: func() ([]netip.Addr, error) { return nil, errors.New("netlink: permission denied") }})
	w.Want([]string{"any.test"})
	waitPending(t, w)
	if got := addrs(w, "any.test"); got != "" {
		t.Errorf("addresses = %q, want none", got)
	}
	if n := testutil.ToFloat64(w.metrics.lookups.WithLabelValues("any.test", "error")); n < 1 {
		t.Errorf(`varnishgw_dns_lookups_total{result="error"} = %v, want at least 1`, n)
	}
}

// TestRefuses: the refuse decision, for the default list and for one
// without "self".
func TestRefuses(t *testing.T) {
	def, err := ParseRefuse(DefaultRefuse)
	if err != nil {
		t.Fatal(err)
	}
	noSelf, err := ParseRefuse([]string{"169.254.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	own := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.244.1.7"), netip.MustParseAddr("fd00:10:244::7"), netip.MustParseAddr("fe80::1%eth0")}
	for _, tc := range []struct {
		addr   string
		refuse Refuse
		want   bool
	}{
		{"127.0.0.1", def, true},
		{"127.1.2.3", def, true},
		{"::1", def, true},
		{"169.254.169.254", def, true}, // AWS, GCP, Azure IMDS, OpenStack
		{"fe80::1", def, true},
		{"fd00:ec2::254", def, true},          // AWS IPv6 metadata
		{"100.100.100.200", def, true},        // Alibaba Cloud metadata
		{"168.63.129.16", def, true},          // Azure wireserver
		{"64:ff9b::a9fe:a9fe", def, true},     // NAT64 of 169.254.169.254
		{"64:ff9b::808:808", def, true},       // NAT64 of any IPv4 address: the whole prefix
		{"::ffff:169.254.169.254", def, true}, // IPv4-mapped
		{"0.0.0.0", def, true},
		{"::", def, true},
		{"224.0.0.1", def, true},
		{"ff02::1", def, true},
		{"255.255.255.255", def, true},
		{"10.244.1.7", def, true},     // the pod's own address
		{"fd00:10:244::7", def, true}, // its own IPv6 address
		{"10.244.1.8", def, false},    // another pod
		{"100.100.100.201", def, false},
		{"100.64.0.1", def, false}, // shared address space (CGNAT), used for pods on some clusters
		{"168.63.129.17", def, false},
		{"64:ff9c::a9fe:a9fe", def, false},
		{"10.0.0.1", def, false},
		{"192.168.1.1", def, false},
		{"172.16.0.1", def, false},
		{"8.8.8.8", def, false},
		{"fd00::1", def, false},
		{"2001:db8::1", def, false},
		{"10.244.1.7", noSelf, false}, // without "self" the pod's addresses are not refused
		{"169.254.169.254", noSelf, true},
		{"127.0.0.1", Refuse{}, false},
	} {
		if got := tc.refuse.Refuses(netip.MustParseAddr(tc.addr), own); got != tc.want {
			t.Errorf("Refuse%+v.Refuses(%s) = %v, want %v", tc.refuse, tc.addr, got, tc.want)
		}
	}
}
