// Package dnswatch follows the addresses of DNS names for the chaperone:
// the names of the ExternalName Services a Gateway's routes send traffic
// to (routing.ExternalNameHosts), whose addresses become the endpoints of
// their backends (routing.Objects.ExternalNames).
//
// A Watcher asks the pod's DNS servers (the nameservers of
// /etc/resolv.conf, or the ones configured) for the A and AAAA records of
// each name it is told to follow, with github.com/miekg/dns, so that it
// knows the records' TTL, which Go's resolver does not tell. It follows
// CNAME chains as the server returns them (and asks again for a chain's
// end when the server stopped there), and asks again when the shortest TTL
// of the records it used runs out, kept between MinTTL and MaxTTL (5 s and
// 5 min by default).
//
// A lookup that fails (no answer, an error code, a name that does not
// exist, no address, or only refused addresses) never replaces the last
// good addresses: the name keeps them, the failure is logged and counted,
// and the lookup is tried again after MinTTL. Refused addresses (Refuse; by
// default loopback, link-local, the cloud metadata endpoints, NAT64, the
// pod's own interface addresses, unspecified and multicast) are dropped
// from every answer: the pod's own ports and the node's metadata service
// are never backends.
package dnswatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
)

// Defaults of Config.
const (
	DefaultMinTTL     = 5 * time.Second
	DefaultMaxTTL     = 5 * time.Minute
	DefaultTimeout    = 2 * time.Second
	DefaultResolvConf = "/etc/resolv.conf"
	// maxChain bounds the CNAME hops followed for one name.
	maxChain = 8
)

// DefaultRefuse is the refuse list whose addresses are never used
// (gwruntime.DefaultExternalNameRefuse, the chaperone's default).
var DefaultRefuse = gwruntime.DefaultExternalNameRefuse

// Refuse says which addresses are never endpoints.
type Refuse struct {
	// Prefixes are refused whole (an address is a /32 or /128).
	Prefixes []netip.Prefix
	// Self refuses the pod's own addresses, those of its network
	// interfaces (Config.OwnAddrs), read at every lookup:
	// gwruntime.ExternalNameRefuseSelf in the list.
	Self bool
}

// Refuses reports whether r refuses a, own being the pod's addresses (used
// when r.Self). An IPv4-mapped IPv6 address is taken as its IPv4 address.
func (r Refuse) Refuses(a netip.Addr, own []netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if slices.ContainsFunc(r.Prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) {
		return true
	}
	return r.Self && slices.ContainsFunc(own, func(o netip.Addr) bool { return o.Unmap().WithZone("") == a })
}

// InterfaceAddrs returns the addresses of this host's network interfaces
// (in a pod: the pod's), the default Config.OwnAddrs.
func InterfaceAddrs() ([]netip.Addr, error) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("read the pod's own addresses (refused as endpoints): %w", err)
	}
	out := make([]netip.Addr, 0, len(ifaddrs))
	for _, ia := range ifaddrs {
		var ip net.IP
		switch ia := ia.(type) {
		case *net.IPNet:
			ip = ia.IP
		case *net.IPAddr:
			ip = ia.IP
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// Config configures a Watcher.
type Config struct {
	// Servers are the DNS servers asked, host:port, in order; empty: the
	// nameservers of ResolvConf.
	Servers []string
	// ResolvConf is read when Servers is empty (DefaultResolvConf).
	ResolvConf string
	// MinTTL and MaxTTL bound the time between two lookups of a name
	// (DefaultMinTTL, DefaultMaxTTL); MinTTL is also the retry interval
	// after a failure.
	MinTTL, MaxTTL time.Duration
	// Timeout bounds one query to one server (DefaultTimeout).
	Timeout time.Duration
	// Refuse are the addresses dropped from answers; nil: DefaultRefuse.
	Refuse *Refuse
	// OwnAddrs returns the pod's own addresses, for Refuse.Self; nil:
	// InterfaceAddrs. A lookup fails when it fails.
	OwnAddrs func() ([]netip.Addr, error)
	Logger   *slog.Logger
}

// ParseRefuse parses a refuse list (--external-name-refuse): CIDR
// prefixes, addresses (a /32 or /128) and gwruntime.ExternalNameRefuseSelf
// for the pod's own addresses, naming the bad one in its error.
func ParseRefuse(list []string) (Refuse, error) {
	r := Refuse{Prefixes: make([]netip.Prefix, 0, len(list))}
	for _, s := range list {
		if s == gwruntime.ExternalNameRefuseSelf {
			r.Self = true
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			r.Prefixes = append(r.Prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Refuse{}, fmt.Errorf("%q is not an address prefix such as 169.254.0.0/16, an address, or %q (the pod's own addresses): %w",
				s, gwruntime.ExternalNameRefuseSelf, err)
		}
		r.Prefixes = append(r.Prefixes, p.Masked())
	}
	return r, nil
}

// Watcher follows the addresses of a set of DNS names. It is a
// prometheus.Collector of its lookups.
type Watcher struct {
	cfg     Config
	log     *slog.Logger
	metrics *collectors

	mu      sync.Mutex
	ctx     context.Context // nil until Run
	changed func()
	names   map[string]*entry
}

type entry struct {
	name   string
	cancel context.CancelFunc
	done   bool         // a lookup finished (success or failure)
	addrs  []netip.Addr // the last good addresses
	failed bool         // the last lookup failed (logged once)
	// refused are the addresses the last answer had that are refused
	// (logged when they change).
	refused []netip.Addr
}

// New checks cfg and returns a Watcher; it reads ResolvConf when no
// servers are given.
func New(cfg Config) (*Watcher, error) {
	if cfg.MinTTL <= 0 {
		cfg.MinTTL = DefaultMinTTL
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.MaxTTL < cfg.MinTTL {
		return nil, fmt.Errorf("dnswatch: MaxTTL %s is below MinTTL %s", cfg.MaxTTL, cfg.MinTTL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Refuse == nil {
		r, err := ParseRefuse(DefaultRefuse)
		if err != nil {
			return nil, err
		}
		cfg.Refuse = &r
	}
	if cfg.OwnAddrs == nil {
		cfg.OwnAddrs = InterfaceAddrs
	}
	if len(cfg.Servers) == 0 {
		path := cfg.ResolvConf
		if path == "" {
			path = DefaultResolvConf
		}
		cc, err := dns.ClientConfigFromFile(path)
		if err != nil {
			return nil, fmt.Errorf("read the DNS servers from %s: %w; name one with --dns-server", path, err)
		}
		for _, s := range cc.Servers {
			cfg.Servers = append(cfg.Servers, net.JoinHostPort(s, cc.Port))
		}
		if len(cfg.Servers) == 0 {
			return nil, fmt.Errorf("%s names no nameserver; name one with --dns-server", path)
		}
	}
	for _, s := range cfg.Servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("DNS server %q is not host:port, for example 10.96.0.10:53: %w", s, err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Watcher{cfg: cfg, log: log.With("component", "dnswatch"), metrics: newCollectors(), names: map[string]*entry{}}, nil
}

// Servers are the DNS servers the Watcher asks.
func (w *Watcher) Servers() []string { return slices.Clone(w.cfg.Servers) }

// Run follows the names Want gives until ctx ends, calling changed (which
// must not block) whenever the addresses of a name change and when the
// first lookup of a name finishes.
func (w *Watcher) Run(ctx context.Context, changed func()) {
	w.mu.Lock()
	w.ctx, w.changed = ctx, changed
	for _, e := range w.names {
		w.startLocked(e)
	}
	w.mu.Unlock()
	<-ctx.Done()
	w.mu.Lock()
	for _, e := range w.names {
		if e.cancel != nil {
			e.cancel()
		}
	}
	w.mu.Unlock()
}

// Want makes names the set followed: new names are looked up at once,
// names no longer wanted are forgotten with their addresses. It never
// blocks on DNS.
func (w *Watcher) Want(names []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSuffix(strings.ToLower(n), ".")
		if n == "" {
			continue
		}
		want[n] = true
		if w.names[n] == nil {
			e := &entry{name: n}
			w.names[n] = e
			if w.ctx != nil {
				w.startLocked(e)
			}
		}
	}
	for n, e := range w.names {
		if !want[n] {
			if e.cancel != nil {
				e.cancel()
			}
			delete(w.names, n)
			w.metrics.forget(n)
		}
	}
}

// Addrs returns the last good addresses of every followed name that has
// any (a copy).
func (w *Watcher) Addrs() map[string][]netip.Addr {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string][]netip.Addr, len(w.names))
	for n, e := range w.names {
		if len(e.addrs) > 0 {
			out[n] = slices.Clone(e.addrs)
		}
	}
	return out
}

// Pending reports whether the first lookup of a followed name has not
// finished yet (each lookup ends within the servers' timeouts).
func (w *Watcher) Pending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.names {
		if !e.done {
			return true
		}
	}
	return false
}

func (w *Watcher) startLocked(e *entry) {
	ctx, cancel := context.WithCancel(w.ctx)
	e.cancel = cancel
	go w.follow(ctx, e)
}

// follow looks e's name up until ctx ends, again after each TTL.
func (w *Watcher) follow(ctx context.Context, e *entry) {
	for {
		addrs, refused, ttl, err := w.lookup(ctx, e.name)
		if ctx.Err() != nil {
			return
		}
		next := w.record(e, addrs, refused, ttl, err)
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// record applies the outcome of one lookup of e and returns when to look
// again.
func (w *Watcher) record(e *entry, addrs, refused []netip.Addr, ttl time.Duration, err error) time.Duration {
	w.mu.Lock()
	if w.names[e.name] != e {
		w.mu.Unlock()
		return w.cfg.MinTTL // forgotten meanwhile; ctx ends it
	}
	first := !e.done
	e.done = true
	if len(refused) > 0 {
		w.metrics.refused.WithLabelValues(e.name).Add(float64(len(refused)))
	}
	if !slices.Equal(refused, e.refused) && len(refused) > 0 {
		w.log.Warn("DNS answer has addresses that are never backends; dropped them", "name", e.name,
			"refused", refused, "hint", "loopback, link-local, cloud metadata, NAT64, the pod's own, unspecified and multicast addresses are refused (--external-name-refuse)")
	}
	e.refused = refused
	if err != nil {
		w.metrics.lookups.WithLabelValues(e.name, "error").Inc()
		if !e.failed {
			w.log.Warn("DNS lookup failed; keeping the last good addresses", "name", e.name, "addresses", e.addrs, "error", err,
				"retry", w.cfg.MinTTL)
		} else {
			w.log.Debug("DNS lookup failed again", "name", e.name, "error", err)
		}
		e.failed = true
		changed := w.changed
		w.mu.Unlock()
		if first && changed != nil {
			changed()
		}
		return w.cfg.MinTTL
	}
	w.metrics.lookups.WithLabelValues(e.name, "ok").Inc()
	w.metrics.addresses.WithLabelValues(e.name).Set(float64(len(addrs)))
	if e.failed {
		w.log.Info("DNS lookup succeeded again", "name", e.name, "addresses", addrs)
	}
	e.failed = false
	moved := !slices.Equal(addrs, e.addrs)
	if moved {
		w.log.Info("DNS name has new addresses", "name", e.name, "addresses", addrs, "previous", e.addrs, "ttl", ttl)
	}
	e.addrs = addrs
	changed := w.changed
	w.mu.Unlock()
	if (moved || first) && changed != nil {
		changed()
	}
	return min(max(ttl, w.cfg.MinTTL), w.cfg.MaxTTL)
}

// errNoAddress is a lookup that found no usable address.
var errNoAddress = errors.New("no usable address")

// lookup asks for the A and AAAA records of name. It returns the usable
// addresses (sorted), those it refused, and the shortest TTL of the
// records it used; an error when either query failed or no address is
// usable.
func (w *Watcher) lookup(ctx context.Context, name string) (addrs, refused []netip.Addr, ttl time.Duration, err error) {
	ttl = w.cfg.MaxTTL
	var found []netip.Addr
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		a, t, err := w.resolve(ctx, name, qtype)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("%s %s: %w", name, dns.TypeToString[qtype], err)
		}
		found = append(found, a...)
		if len(a) > 0 {
			ttl = min(ttl, t)
		}
	}
	var own []netip.Addr
	if w.cfg.Refuse.Self {
		if own, err = w.cfg.OwnAddrs(); err != nil {
			return nil, nil, 0, fmt.Errorf("%s: %w", name, err)
		}
	}
	for _, a := range found {
		a = a.Unmap()
		if w.cfg.Refuse.Refuses(a, own) {
			refused = append(refused, a)
			continue
		}
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	slices.SortFunc(refused, netip.Addr.Compare)
	refused = slices.Compact(refused)
	if len(addrs) == 0 {
		if len(refused) > 0 {
			return nil, refused, 0, fmt.Errorf("%s: %w: every address is refused (%v)", name, errNoAddress, refused)
		}
		return nil, nil, 0, fmt.Errorf("%s: %w: no A or AAAA record", name, errNoAddress)
	}
	return addrs, refused, ttl, nil
}

// resolve returns the addresses of one type for name, following the
// CNAME chain of the answers, and the shortest TTL along the chain.
func (w *Watcher) resolve(ctx context.Context, name string, qtype uint16) ([]netip.Addr, time.Duration, error) {
	target := dns.Fqdn(name)
	ttl := uint32(math.MaxUint32)
	for range maxChain {
		msg, err := w.exchange(ctx, target, qtype)
		if err != nil {
			return nil, 0, err
		}
		var addrs []netip.Addr
		// Follow the chain within this answer.
		for range maxChain {
			var next string
			for _, rr := range msg.Answer {
				h := rr.Header()
				if !strings.EqualFold(h.Name, target) {
					continue
				}
				switch r := rr.(type) {
				case *dns.A:
					if a, ok := netip.AddrFromSlice(r.A.To4()); ok {
						addrs = append(addrs, a)
						ttl = min(ttl, h.Ttl)
					}
				case *dns.AAAA:
					if a, ok := netip.AddrFromSlice(r.AAAA.To16()); ok {
						addrs = append(addrs, a)
						ttl = min(ttl, h.Ttl)
					}
				case *dns.CNAME:
					next = r.Target
					ttl = min(ttl, h.Ttl)
				}
			}
			if len(addrs) > 0 || next == "" {
				break
			}
			target = next
		}
		if len(addrs) > 0 {
			return addrs, time.Duration(ttl) * time.Second, nil
		}
		if !hasCNAME(msg, target) && strings.EqualFold(msg.Question[0].Name, target) {
			// NOERROR without records of this type (NODATA).
			return nil, 0, nil
		}
		// The server stopped at a CNAME: ask for its target.
	}
	return nil, 0, fmt.Errorf("CNAME chain longer than %d names", maxChain)
}

func hasCNAME(msg *dns.Msg, name string) bool {
	return slices.ContainsFunc(msg.Answer, func(rr dns.RR) bool {
		_, ok := rr.(*dns.CNAME)
		return ok && strings.EqualFold(rr.Header().Name, name)
	})
}

// exchange asks the servers in order for name's records of qtype, over
// UDP and, when the answer is truncated, TCP; the first answer with
// NOERROR wins.
func (w *Watcher) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.RecursionDesired = true
	var errs []error
	for _, srv := range w.cfg.Servers {
		msg, err := w.ask(ctx, "udp", srv, q)
		if err == nil && msg.Truncated {
			msg, err = w.ask(ctx, "tcp", srv, q)
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("server %s: %w", srv, err))
		case msg.Rcode == dns.RcodeNameError:
			return nil, fmt.Errorf("server %s: the name does not exist (NXDOMAIN)", srv)
		case msg.Rcode != dns.RcodeSuccess:
			errs = append(errs, fmt.Errorf("server %s answered %s", srv, dns.RcodeToString[msg.Rcode]))
		default:
			return msg, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func (w *Watcher) ask(ctx context.Context, network, srv string, q *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: w.cfg.Timeout}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	msg, _, err := c.ExchangeContext(ctx, q, srv)
	return msg, err
}

// Describe implements prometheus.Collector.
func (w *Watcher) Describe(ch chan<- *prometheus.Desc) { w.metrics.describe(ch) }

// Collect implements prometheus.Collector.
func (w *Watcher) Collect(ch chan<- prometheus.Metric) { w.metrics.collect(ch) }

type collectors struct {
	lookups   *prometheus.CounterVec
	addresses *prometheus.GaugeVec
	refused   *prometheus.CounterVec
}

// newCollectors returns:
//
//	varnishgw_dns_lookups_total{name,result}        lookups by result (ok, error)
//	varnishgw_dns_addresses{name}                   addresses in use after the last good lookup
//	varnishgw_dns_refused_addresses_total{name}     addresses dropped from answers (Refuse)
func newCollectors() *collectors {
	return &collectors{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "varnishgw_dns_lookups_total",
			Help: "DNS lookups of the names of ExternalName Services, by name and result (ok, error); a failed lookup keeps the last good addresses.",
		}, []string{"name", "result"}),
		addresses: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "varnishgw_dns_addresses",
			Help: "Addresses of the name of an ExternalName Service from its last good lookup.",
		}, []string{"name"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "varnishgw_dns_refused_addresses_total",
			Help: "Addresses dropped from DNS answers because they are never backends (loopback, link-local, metadata endpoints, NAT64, the pod's own; --external-name-refuse).",
		}, []string{"name"}),
	}
}

func (c *collectors) describe(ch chan<- *prometheus.Desc) {
	c.lookups.Describe(ch)
	c.addresses.Describe(ch)
	c.refused.Describe(ch)
}

func (c *collectors) collect(ch chan<- prometheus.Metric) {
	c.lookups.Collect(ch)
	c.addresses.Collect(ch)
	c.refused.Collect(ch)
}

func (c *collectors) forget(name string) {
	c.lookups.DeletePartialMatch(prometheus.Labels{"name": name})
	c.addresses.DeleteLabelValues(name)
	c.refused.DeleteLabelValues(name)
}
