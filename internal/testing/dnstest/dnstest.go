// Package dnstest runs a real DNS server (github.com/miekg/dns) on a
// loopback UDP and TCP port for tests: it answers A, AAAA and CNAME
// questions from records the test sets and changes while it runs, with
// the records' TTLs, and can answer an error code or stop.
package dnstest

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// Server is a running DNS server.
type Server struct {
	addr string
	udp  *dns.Server
	tcp  *dns.Server

	mu      sync.Mutex
	records map[string][]dns.RR // by lower-case FQDN
	rcode   map[string]int      // a name answered with this code
	// chase: CNAMEs are followed within one answer (a recursive
	// resolver's habit); off, the answer stops at the first CNAME.
	chase   bool
	queries int
	stopped bool
}

// Start starts a server on 127.0.0.1 (UDP and TCP, one port) that the
// test stops at its end.
func Start(t testing.TB) *Server {
	t.Helper()
	// The UDP port's TCP twin may be taken: try other ports.
	var pc net.PacketConn
	var l net.Listener
	for try := 0; l == nil; try++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err != nil {
			pc.Close()
			if try == 20 {
				t.Fatalf("no port free for both UDP and TCP on 127.0.0.1: %v", err)
			}
		}
	}
	s := &Server{addr: pc.LocalAddr().String(), records: map[string][]dns.RR{}, rcode: map[string]int{}, chase: true}
	s.udp = &dns.Server{PacketConn: pc, Handler: s}
	s.tcp = &dns.Server{Listener: l, Handler: s}
	started := make(chan struct{}, 2)
	s.udp.NotifyStartedFunc = func() { started <- struct{}{} }
	s.tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	go s.udp.ActivateAndServe() //nolint:errcheck // ends with Shutdown
	go s.tcp.ActivateAndServe() //nolint:errcheck // ends with Shutdown
	<-started
	<-started
	t.Cleanup(s.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Stop stops the server: queries then time out.
func (s *Server) Stop() {
	s.mu.Lock()
	stopped := s.stopped
	s.stopped = true
	s.mu.Unlock()
	if !stopped {
		s.udp.Shutdown() //nolint:errcheck // best effort in tests
		s.tcp.Shutdown() //nolint:errcheck // best effort in tests
	}
}

// SetAddrs makes name resolve to addrs (A and AAAA records) with ttl
// seconds, replacing its records.
func (s *Server) SetAddrs(name string, ttl uint32, addrs ...string) {
	fqdn := dns.Fqdn(strings.ToLower(name))
	var rrs []dns.RR
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		h := dns.RR_Header{Name: fqdn, Class: dns.ClassINET, Ttl: ttl}
		if ip.Is4() {
			h.Rrtype = dns.TypeA
			rrs = append(rrs, &dns.A{Hdr: h, A: ip.AsSlice()})
		} else {
			h.Rrtype = dns.TypeAAAA
			rrs = append(rrs, &dns.AAAA{Hdr: h, AAAA: ip.AsSlice()})
		}
	}
	s.mu.Lock()
	s.records[fqdn] = rrs
	delete(s.rcode, fqdn)
	s.mu.Unlock()
}

// SetCNAME makes name an alias of target with ttl seconds.
func (s *Server) SetCNAME(name, target string, ttl uint32) {
	fqdn := dns.Fqdn(strings.ToLower(name))
	rr := &dns.CNAME{Hdr: dns.RR_Header{Name: fqdn, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: dns.Fqdn(target)}
	s.mu.Lock()
	s.records[fqdn] = []dns.RR{rr}
	delete(s.rcode, fqdn)
	s.mu.Unlock()
}

// SetRcode makes the server answer questions for name with rcode, for
// example dns.RcodeNameError or dns.RcodeServerFailure.
func (s *Server) SetRcode(name string, rcode int) {
	s.mu.Lock()
	s.rcode[dns.Fqdn(strings.ToLower(name))] = rcode
	s.mu.Unlock()
}

// ChaseCNAMEs sets whether an answer follows CNAMEs (default true).
func (s *Server) ChaseCNAMEs(on bool) {
	s.mu.Lock()
	s.chase = on
	s.mu.Unlock()
}

// Queries is the number of questions answered so far.
func (s *Server) Queries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	s.mu.Lock()
	s.queries++
	if len(req.Question) == 1 {
		q := req.Question[0]
		name := strings.ToLower(q.Name)
		if rc, ok := s.rcode[name]; ok {
			m.Rcode = rc
		} else if _, ok := s.records[name]; !ok {
			m.Rcode = dns.RcodeNameError
		}
		for hops := 0; m.Rcode == dns.RcodeSuccess && hops < 16; hops++ {
			var next string
			for _, rr := range s.records[name] {
				switch r := rr.(type) {
				case *dns.CNAME:
					m.Answer = append(m.Answer, dns.Copy(rr))
					next = strings.ToLower(r.Target)
				default:
					if rr.Header().Rrtype == q.Qtype {
						m.Answer = append(m.Answer, dns.Copy(rr))
					}
				}
			}
			if next == "" || !s.chase {
				break
			}
			name = next
		}
	}
	s.mu.Unlock()
	w.WriteMsg(m) //nolint:errcheck // the client times out
}
