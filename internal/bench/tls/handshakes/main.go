// Command handshakes measures new TLS handshakes per second: each of -c
// workers opens a TCP connection, makes a full TLS handshake (no session
// cache, so never a resumption), sends one HTTP/1.1 request with
// "Connection: close", reads the whole answer and closes, again and again
// for -d after a warm-up of -warmup. It prints one line of key=value pairs
// (handshakes_per_s, ok, errors, resumed, version, cipher, curve) that
// make bench-tls (internal/bench/tls/bench.sh) reads.
//
// h2load and wrk are not used for this: both resume the TLS session on
// every new connection (measured: 196 of 200 connections resumed through
// nginx), which skips the certificate signature and key exchange whose
// cost this measures.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "", "host:port of the TLS server")
	host := flag.String("host", "", "server name (SNI and Host header)")
	path := flag.String("path", "/", "request path")
	caFile := flag.String("ca", "", "PEM file of the certificate(s) to trust")
	conns := flag.Int("c", 16, "concurrent connections")
	dur := flag.Duration("d", 10*time.Second, "measured duration")
	warm := flag.Duration("warmup", 2*time.Second, "warm-up before the measured duration")
	curve := flag.String("curve", "X25519", "key exchange group: X25519 or P256")
	flag.Parse()
	s, err := run(options{addr: *addr, host: *host, path: *path, caFile: *caFile, curve: *curve, conns: *conns, dur: *dur, warm: *warm})
	if s != nil {
		fmt.Println(s)
		if s.firstErr != "" {
			fmt.Fprintln(os.Stderr, "handshakes: first error:", s.firstErr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "handshakes:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	addr, host, path, caFile, curve string
	conns                           int
	dur, warm                       time.Duration
}

// summary is one run's result.
type summary struct {
	ok, errors, resumed int64
	elapsed             time.Duration
	state               tls.ConnectionState // of one connection
	firstErr            string
}

// String is the line make bench-tls reads.
func (s *summary) String() string {
	return fmt.Sprintf("handshakes_per_s=%.1f ok=%d errors=%d resumed=%d seconds=%.2f version=%s cipher=%s curve=%s",
		float64(s.ok)/s.elapsed.Seconds(), s.ok, s.errors, s.resumed, s.elapsed.Seconds(),
		strings.ReplaceAll(tls.VersionName(s.state.Version), " ", ""), tls.CipherSuiteName(s.state.CipherSuite), s.state.CurveID)
}

// result counts one run's connections.
type result struct {
	ok, errors, resumed atomic.Int64
	firstErr            atomic.Value // string
	state               atomic.Value // tls.ConnectionState
}

// run makes o.conns connections at a time for o.warm + o.dur and counts
// those of o.dur.
func run(o options) (*summary, error) {
	if o.addr == "" || o.host == "" || o.caFile == "" {
		return nil, errors.New("-addr, -host and -ca are required")
	}
	if o.conns < 1 {
		return nil, fmt.Errorf("-c %d: want at least 1 connection", o.conns)
	}
	if o.dur <= 0 {
		return nil, fmt.Errorf("-d %s: want a positive duration", o.dur)
	}
	group, err := curveID(o.curve)
	if err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(o.caFile)
	if err != nil {
		return nil, fmt.Errorf("read -ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-ca %s: no PEM certificate in it", o.caFile)
	}
	addr, host, path, conns, dur, warm := o.addr, o.host, o.path, o.conns, o.dur, o.warm
	cfg := &tls.Config{
		ServerName:       host,
		RootCAs:          roots,
		NextProtos:       []string{"http/1.1"},
		CurvePreferences: []tls.CurveID{group},
		// No ClientSessionCache: every connection is a full handshake.
	}
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: varnishgw-handshakes\r\nConnection: close\r\n\r\n", path, host)

	var measuring atomic.Bool
	res := &result{}
	end := time.Now().Add(warm + dur)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The clock, not ctx.Err(), ends the run: a dial that failed
			// at the deadline must not count as an error, and ctx's
			// timer may fire after the dial's own deadline has.
			for time.Now().Before(end) {
				err := once(ctx, addr, cfg, req, res)
				if !measuring.Load() || !time.Now().Before(end) {
					continue
				}
				if err != nil {
					res.errors.Add(1)
					res.firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				res.ok.Add(1)
			}
		}()
	}
	time.Sleep(warm)
	measuring.Store(true)
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start)

	s := &summary{ok: res.ok.Load(), errors: res.errors.Load(), resumed: res.resumed.Load(), elapsed: elapsed}
	s.state, _ = res.state.Load().(tls.ConnectionState)
	s.firstErr, _ = res.firstErr.Load().(string)
	if s.ok == 0 {
		return s, errors.New("no request succeeded")
	}
	return s, nil
}

// once makes one connection, one full handshake and one request.
func once(ctx context.Context, addr string, cfg *tls.Config, req string, res *result) error {
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect and handshake: %w", err)
	}
	defer c.Close()
	tc := c.(*tls.Conn)
	st := tc.ConnectionState()
	if st.DidResume {
		res.resumed.Add(1)
	}
	res.state.CompareAndSwap(nil, st)
	if _, err := io.WriteString(c, req); err != nil {
		return fmt.Errorf("write the request: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read the body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s, want 200", resp.Status)
	}
	return nil
}

// curveID is the key exchange group of -curve.
func curveID(name string) (tls.CurveID, error) {
	switch name {
	case "X25519":
		return tls.X25519, nil
	case "P256":
		return tls.CurveP256, nil
	}
	return 0, fmt.Errorf("-curve %q: want X25519 or P256", name)
}
