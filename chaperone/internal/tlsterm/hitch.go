package tlsterm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// HitchConfig is one hitch's configuration: one HTTPS port.
type HitchConfig struct {
	// ListenHost is the frontend's address ("" for every address).
	ListenHost string
	Port       int
	// Backend is the Unix socket of varnishd's listener port-N.
	Backend string
	// PEMFiles are the certificates, the default (served when no SNI
	// matches) first. hitch 1.7.2 takes its last pem-file as the
	// default, so Render writes them in reverse order.
	PEMFiles []string
	// HTTP2 offers h2 before http/1.1 in ALPN.
	HTTP2 bool
	// Workers is hitch's worker count (0: 1).
	Workers int
	// ProxyProxy: every connection starts with a PROXY protocol header
	// from a load balancer, which hitch passes on to varnishd unchanged
	// (proxy-proxy) instead of writing its own v2 header: varnishd sees
	// the client's address, but not the TLS server name or ALPN (no TLVs).
	ProxyProxy bool
	// AsRoot names root as hitch's user and group: hitch refuses to run
	// its workers as root otherwise. Set when the chaperone runs as root
	// (tests); the image runs it as an unprivileged user and hitch then
	// keeps that user.
	AsRoot bool
}

// Render returns the configuration file's text.
func (c HitchConfig) Render() string {
	host := c.ListenHost
	if host == "" {
		host = "*"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by the varnishgw chaperone; changes are overwritten.\n")
	fmt.Fprintf(&b, "frontend = %q\n", "["+host+"]:"+strconv.Itoa(c.Port))
	fmt.Fprintf(&b, "backend = %q\n", c.Backend)
	if c.ProxyProxy {
		b.WriteString("proxy-proxy = on\n")
	} else {
		b.WriteString("write-proxy-v2 = on\nproxy-tlv = on\n")
	}
	if c.HTTP2 {
		b.WriteString("alpn-protos = \"h2, http/1.1\"\n")
	} else {
		b.WriteString("alpn-protos = \"http/1.1\"\n")
	}
	b.WriteString("tls-protos = TLSv1.2 TLSv1.3\n")
	fmt.Fprintf(&b, "daemon = off\nworkers = %d\nocsp-dir = \"\"\nlog-level = 1\n", max(c.Workers, 1))
	if c.AsRoot {
		b.WriteString("user = \"root\"\ngroup = \"root\"\n")
	}
	for _, p := range slices.Backward(c.PEMFiles) {
		fmt.Fprintf(&b, "pem-file = %q\n", p)
	}
	return b.String()
}

// TestConfig runs hitch --test on a configuration file: hitch parses it
// and loads its certificates (the backend socket must exist).
func TestConfig(ctx context.Context, bin, path string) error {
	out, err := exec.CommandContext(ctx, bin, "--test", "--config="+path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hitch --test --config=%s: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// writeAtomic writes data to path with mode 0600 through a temporary file
// in the same directory and a rename, so that a reader sees the old or the
// new content, never a part.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// hitch supervises the hitch process of one port: it starts it, restarts
// it with backoff when it exits, and sends it SIGHUP to reload.
type hitch struct {
	bin, conf string
	port      int
	// workers is the configuration's worker count: one generation.
	workers   int
	log       *slog.Logger
	onRestart func()

	// reloadWait bounds the wait for an older worker generation before a
	// reload (see reloadLoop).
	reloadWait time.Duration
	reloadReq  chan struct{}
	onReload   func(waited time.Duration, timedOut bool)
	// listenHost is hitch's frontend address ("" for all), for the
	// sockets that hold the port during a reload (holdPort).
	listenHost string
	// online receives a value when a worker says it is online (it has
	// bound its listen socket); it holds one generation's.
	online chan struct{}

	mu sync.Mutex
	// waiters are closed when the next reload has taken effect.
	waiters []chan struct{}
	cmd     *exec.Cmd
	running bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// Backoff bounds of hitch restarts.
const (
	restartMin = 500 * time.Millisecond
	restartMax = 30 * time.Second
	// stableAfter resets the backoff: a hitch that ran this long was fine.
	stableAfter = time.Minute
)

func startHitch(bin, conf, listenHost string, port, workers int, log *slog.Logger, reloadWait time.Duration, onRestart func(), onReload func(time.Duration, bool)) *hitch {
	ctx, cancel := context.WithCancel(context.Background())
	workers = max(workers, 1)
	h := &hitch{bin: bin, conf: conf, listenHost: listenHost, port: port, workers: workers, log: log, onRestart: onRestart, onReload: onReload,
		reloadWait: reloadWait, reloadReq: make(chan struct{}, 1), online: make(chan struct{}, workers), cancel: cancel, done: make(chan struct{})}
	go h.loop(ctx)
	go h.reloadLoop(ctx)
	return h
}

func (h *hitch) loop(ctx context.Context) {
	defer close(h.done)
	backoff := restartMin
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			h.onRestart()
		}
		started := time.Now()
		err := h.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > stableAfter {
			backoff = restartMin
		}
		h.log.Warn("hitch exited; restarting", "error", err, "in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartMax)
	}
}

func (h *hitch) runOnce(ctx context.Context) error {
	cmd := exec.Command(h.bin, "--config="+h.conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return errors.New("stopped")
	}
	if err := cmd.Start(); err != nil {
		h.mu.Unlock()
		return fmt.Errorf("start %s: %w", h.bin, err)
	}
	h.cmd, h.running = cmd, true
	h.mu.Unlock()
	h.log.Info("hitch started", "pid", cmd.Process.Pid, "config", h.conf)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.logLines(stdout) }()
	go func() { defer wg.Done(); h.logLines(stderr) }()
	wg.Wait()
	err = cmd.Wait()
	h.mu.Lock()
	h.running = false
	h.mu.Unlock()
	if err == nil {
		err = errors.New("exited with status 0")
	}
	return fmt.Errorf("hitch (pid %d): %w", cmd.Process.Pid, err)
}

// logLines logs hitch's output, one record per line: its errors at WARN,
// the rest at INFO.
func (h *hitch) logLines(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.Contains(line, "} Process ") && strings.HasSuffix(line, " online") {
			select {
			case h.online <- struct{}{}:
			default:
			}
		}
		level := slog.LevelInfo
		if strings.Contains(line, "ERROR") || strings.Contains(line, "Error") {
			level = slog.LevelWarn
		}
		h.log.Log(context.Background(), level, line, "stream", "hitch")
	}
}

// Running reports whether the hitch process runs.
func (h *hitch) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running
}

// pid is the running process's ID, 0 when none.
func (h *hitch) pid() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		return 0
	}
	return h.cmd.Process.Pid
}

// reload asks for a reload; it never blocks, and requests made while one
// waits are served by it. The channel is closed once a SIGHUP sent after
// the call has taken effect (hitch's new workers are online, or the wait
// for them gave up), at once when hitch does not run (a restart reads the
// configuration), or when hitch is stopped.
func (h *hitch) reload() <-chan struct{} {
	done := make(chan struct{})
	h.mu.Lock()
	h.waiters = append(h.waiters, done)
	h.mu.Unlock()
	select {
	case h.reloadReq <- struct{}{}:
	default:
	}
	return done
}

// release closes the channels of the reloads requested so far.
func (h *hitch) release() {
	h.mu.Lock()
	ws := h.waiters
	h.waiters = nil
	h.mu.Unlock()
	for _, w := range ws {
		close(w)
	}
}

// reloadLoop sends hitch SIGHUP for each reload request: hitch reads its
// configuration and certificates again, starts a new generation of workers
// and lets the old generation finish its connections.
//
// hitch 1.7.2 mishandles a reload while an older generation still serves
// connections: the new workers and every older one then exit with status
// 1 and their connections are reset (seen in TestRotationUnderLoad; hitch
// issue 285 describes it for repeated SIGHUPs). So a reload waits until
// only the current generation runs, for at most reloadWait, and then
// reloads all the same (a certificate must not wait for ever behind a
// connection that never ends).
func (h *hitch) reloadLoop(ctx context.Context) {
	defer h.release()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.reloadReq:
		}
		start := time.Now()
		timedOut := false
		for {
			pid := h.pid()
			if pid == 0 {
				h.release()
				break // not running: a restart reads the configuration
			}
			if len(childPids(pid)) <= h.workers {
				break
			}
			if time.Since(start) > h.reloadWait {
				timedOut = true
				h.log.Warn("reloading hitch while an older generation of its workers still serves connections: hitch 1.7.2 may reset them", "waited", time.Since(start).Round(time.Millisecond).String())
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		// Each hitch worker listens on its own SO_REUSEPORT socket, and
		// hitch 1.7.2 tells the old workers to close theirs right after
		// forking the new one, which binds its socket only when it has
		// started: in between nothing listens and new connections are
		// refused (TestRotationUnderLoad saw hundreds on a busy machine).
		// The chaperone holds the port with sockets of its own in the
		// same group until the new worker is online; with
		// net.ipv4.tcp_migrate_req=1 the connections queued on them then
		// move to the new worker's socket.
		held := holdPort(h.listenHost, h.port)
	drain: // earlier workers'
		for {
			select {
			case <-h.online:
			default:
				break drain
			}
		}
		h.mu.Lock()
		pid := 0
		// The reloads requested so far: their configuration is on disk.
		waiters := h.waiters
		h.waiters = nil
		if h.running {
			pid = h.cmd.Process.Pid
			if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				h.log.Warn("hitch reload (SIGHUP)", "error", err)
			}
		}
		h.mu.Unlock()
		if pid != 0 {
			h.onReload(time.Since(start), timedOut)
			// The new generation is online: the next reload waits for
			// the old one to finish.
			deadline := time.After(10 * time.Second)
		wait:
			for n := 0; n < h.workers; n++ {
				select {
				case <-h.online:
				case <-deadline:
					h.log.Warn("hitch's new workers did not all say they were online within 10s of the reload", "online", n, "workers", h.workers)
					break wait
				case <-ctx.Done():
					break wait
				}
			}
		}
		for _, l := range held {
			l.Close()
		}
		for _, w := range waiters {
			close(w)
		}
	}
}

// holdPort listens on hitch's frontend addresses (0.0.0.0 and [::],
// IPv6 only, for every address, as hitch binds them) and port with
// SO_REUSEPORT, joining the group of hitch's listen sockets. The sockets
// accept nothing; an address that cannot be bound is skipped.
func holdPort(host string, port int) []net.Listener {
	addrs := []struct{ network, addr string }{{"tcp4", "0.0.0.0"}, {"tcp6", "::"}}
	if host != "" {
		network := "tcp4"
		if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
			network = "tcp6"
		}
		addrs = addrs[:0]
		addrs = append(addrs, struct{ network, addr string }{network, host})
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	var out []net.Listener
	for _, a := range addrs {
		l, err := lc.Listen(context.Background(), a.network, net.JoinHostPort(a.addr, strconv.Itoa(port)))
		if err == nil {
			out = append(out, l)
		}
	}
	return out
}

// childPids lists pid's child processes (its hitch workers).
func childPids(pid int) []int {
	var out []int
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(field); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// stop ends hitch with SIGTERM (SIGKILL to its process group after
// timeout) and stops restarting it.
func (h *hitch) stop(timeout time.Duration) {
	h.mu.Lock()
	h.stopped = true
	h.cancel()
	var pid int
	if h.running {
		pid = h.cmd.Process.Pid
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	h.mu.Unlock()
	select {
	case <-h.done:
	case <-time.After(timeout):
		if pid != 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		<-h.done
	}
	if pid != 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // workers left behind
	}
}
