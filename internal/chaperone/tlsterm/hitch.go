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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HitchConfig is one hitch's configuration: one HTTPS port.
type HitchConfig struct {
	// ListenHost is the frontend's address ("" for every address).
	ListenHost string
	Port       int
	// Backend is the Unix socket of varnishd's listener port-N.
	Backend string
	// PEMFiles are the certificates, the default (served when no SNI
	// matches) first.
	PEMFiles []string
	// HTTP2 offers h2 before http/1.1 in ALPN.
	HTTP2 bool
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
	b.WriteString("write-proxy-v2 = on\nproxy-tlv = on\n")
	if c.HTTP2 {
		b.WriteString("alpn-protos = \"h2, http/1.1\"\n")
	} else {
		b.WriteString("alpn-protos = \"http/1.1\"\n")
	}
	b.WriteString("tls-protos = TLSv1.2 TLSv1.3\n")
	b.WriteString("daemon = off\nworkers = 1\nocsp-dir = \"\"\nlog-level = 1\n")
	if c.AsRoot {
		b.WriteString("user = \"root\"\ngroup = \"root\"\n")
	}
	for _, p := range c.PEMFiles {
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
	log       *slog.Logger
	onRestart func()

	mu      sync.Mutex
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

func startHitch(bin, conf string, port int, log *slog.Logger, onRestart func()) *hitch {
	ctx, cancel := context.WithCancel(context.Background())
	h := &hitch{bin: bin, conf: conf, port: port, log: log, onRestart: onRestart, cancel: cancel, done: make(chan struct{})}
	go h.loop(ctx)
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

// reload sends SIGHUP: hitch reads its configuration and certificates
// again and starts new workers; the old ones finish their connections. A
// hitch that is not running reads the configuration when it restarts.
func (h *hitch) reload() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			h.log.Warn("hitch reload (SIGHUP)", "error", err)
		}
	}
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

// socketExists reports whether path is a Unix socket that accepts
// connections.
func socketExists(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
