// Package varnishd runs varnishd in the foreground under the chaperone: it
// prepares the working directory and a random admin secret, starts varnishd
// with one named listen socket per Gateway port and ghost's loopback admin
// socket, accepts the manager's reverse admin connection (varnishd -M, the
// only CLI: -T none) and turns varnishd's output into structured logs.
//
// varnishd starts with a minimal boot VCL ([BootVCL]) that answers 503 to
// every request; the chaperone then loads main.vcl through the admin
// connection. That way a main.vcl that does not compile is reported like any
// later reload failure (log, metric, Gateway condition) instead of keeping
// varnishd from starting, and readiness stays false until routing is loaded.
package varnishd

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishadm"
)

// BootVCL is the VCL varnishd starts with: every request gets a 503 until
// the chaperone has loaded main.vcl.
const BootVCL = `vcl 4.1;
backend default none;
sub vcl_recv {
	return (synth(503, "varnishgw: starting"));
}
`

// Listener is one named listen socket, varnishd -a NAME=ADDR[,PROXY].
type Listener struct {
	Name string // ghostjson.SocketName(port), e.g. "port-8080"
	// Addr is host:port (":8080"), or the absolute path of a Unix socket.
	Addr string
	// Proxy makes the socket expect the PROXY protocol (v1 or v2) before
	// each connection's first request: the client and server addresses
	// varnishd reports (client.ip, server.ip) and the TLS details (SNI,
	// ALPN) are then those the PROXY header carries.
	Proxy bool
}

// TLSListener is the socket of HTTPS listener port: a Unix socket in
// tlsDir, port-N.sock, to which the TLS terminator (hitch) hands decrypted
// connections with a PROXY v2 header. It has the socket name of the
// listener's port, so ghost routes it as the listener.
func TLSListener(tlsDir string, port int) Listener {
	name := fmt.Sprintf("port-%d", port)
	return Listener{Name: name, Addr: filepath.Join(tlsDir, name+".sock"), Proxy: true}
}

// Arg is the listener's varnishd -a argument. A Unix socket is made mode
// 0600: only varnishd's own user (the TLS terminator runs as the same
// user) may connect.
func (l Listener) Arg() string {
	a := l.Name + "=" + l.Addr
	if l.Proxy {
		a += ",PROXY"
	}
	if strings.HasPrefix(l.Addr, "/") {
		a += ",mode=0600"
	}
	return a
}

// Config says how to run varnishd.
type Config struct {
	// Bin is the varnishd executable.
	Bin string
	// WorkDir is varnishd's working directory (-n). The chaperone keeps its
	// secret and the boot VCL there too.
	WorkDir string
	// Listeners are the client sockets.
	Listeners []Listener
	// GhostAdminAddr is the loopback address of ghost's admin socket
	// (-a ghost-admin=ADDR); empty for none.
	GhostAdminAddr string
	// AdminAddr is the address the chaperone listens on for the manager's
	// reverse admin connection; "127.0.0.1:0" when empty.
	AdminAddr string
	// Storage are -s arguments, e.g. "malloc,256m".
	Storage []string
	// Params are -p arguments, "name=value".
	Params []string
	// ThreadPoolStack is -p thread_pool_stack=VALUE when not empty.
	ThreadPoolStack string
	// Logger receives varnishd's output, one record per line.
	Logger *slog.Logger
	// StartTimeout bounds the wait for the admin connection (default 60s).
	StartTimeout time.Duration
}

// accessLogVSL are the shared memory log records the gateway does not
// write (vsl_mask, on top of varnishd's own mask): the headers, protocol
// and reason of the response the client gets (not its status), everything
// about the backend request and response, and the backend connection and
// storage records. The
// access log (chaperone/internal/accesslog: varnishncsa's Format and
// Query) reads the request line and headers, the response status,
// Timestamp, ReqAcct, ReqStart, VCL_call, VCL_return and ghost's VCL_Log
// records, which stay, as do the transaction records (Begin, End, Link)
// and every error record. The names are tags of Varnish 7.1 and 7.7 alike
// (7.7 knows no BackendReuse: a connection reused is BackendOpen there
// too); varnishd refuses to start on an unknown one.
var accessLogVSL = []string{
	"RespProtocol", "RespReason", "RespHeader", "RespUnset",
	"BereqMethod", "BereqURL", "BereqProtocol", "BereqHeader", "BereqUnset",
	"BerespProtocol", "BerespStatus", "BerespReason", "BerespHeader", "BerespUnset",
	"BereqAcct", "BackendOpen", "BackendClose",
	"Fetch_Body", "TTL", "Storage", "Filters", "VCL_use", "Hit",
}

// DefaultParams returns the gateway's varnishd parameters (-p NAME=VALUE):
// the chaperone passes them before --param, which replaces a default of
// the same name (WithDefaults). docs/performance.md ("Gateway varnishd
// defaults") has the measurement behind each:
//
//   - thread_pools=1: one pool instead of two (a gateway pod has one or
//     two cores; varnishd advises at most one pool per core).
//   - vsl_mask: varnishd's default mask plus the records the access log
//     does not read (accessLogVSL).
func DefaultParams() []string {
	return []string{
		"thread_pools=1",
		"vsl_mask=-" + strings.Join(accessLogVSL, ",-"),
	}
}

// WithDefaults returns DefaultParams, leaving out those whose parameter
// params sets, followed by params: a value given by the user wins, and
// varnishd gets each parameter once. params are NAME=VALUE.
func WithDefaults(params []string) []string {
	set := make(map[string]bool, len(params))
	for _, p := range params {
		name, _, _ := strings.Cut(p, "=")
		set[name] = true
	}
	var out []string
	for _, d := range DefaultParams() {
		if name, _, _ := strings.Cut(d, "="); !set[name] {
			out = append(out, d)
		}
	}
	return append(out, params...)
}

// GhostAdminSocket is the name of ghost's admin listen socket.
const GhostAdminSocket = "ghost-admin"

// Process is a running varnishd.
type Process struct {
	// Admin is the authenticated reverse admin connection to the manager.
	Admin *varnishadm.Conn

	cmd     *exec.Cmd
	workDir string
	secret  []byte
	// adminListener takes the manager's admin connections; it is closed
	// when varnishd exits.
	adminListener net.Listener
	done          chan struct{}
	err           error
	tail          *lineTail
	// stopping is set when the chaperone stops varnishd (Stop): the
	// manager's "got SIGTERM" is then expected.
	stopping atomic.Bool
}

// Start prepares the work dir, starts varnishd and waits until its manager
// has connected back and authenticated. The process is killed when ctx ends
// during the start; afterwards use Stop.
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.AdminAddr == "" {
		cfg.AdminAddr = "127.0.0.1:0"
	}
	secretFile, bootFile, secret, err := PrepareWorkDir(cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for varnishd's admin connection on %s: %w", cfg.AdminAddr, err)
	}

	args := Args(cfg, l.Addr().String(), secretFile, bootFile)
	cmd := exec.Command(cfg.Bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("varnishd stdout: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("varnishd stderr: %w", err)
	}
	p := &Process{cmd: cmd, workDir: cfg.WorkDir, secret: secret, adminListener: l, done: make(chan struct{}), tail: &lineTail{max: 40}}
	cfg.Logger.Info("starting varnishd", "bin", cfg.Bin, "args", args)
	if err := cmd.Start(); err != nil {
		l.Close()
		return nil, fmt.Errorf("start %s: %w", cfg.Bin, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.logLines(cfg.Logger, "stdout", stdout) }()
	go func() { defer wg.Done(); p.logLines(cfg.Logger, "stderr", stderr) }()
	go func() {
		wg.Wait() // the pipes must be drained before Wait closes them
		err := cmd.Wait()
		if err == nil {
			err = errors.New("varnishd exited")
		}
		p.err = fmt.Errorf("varnishd (pid %d): %w", cmd.Process.Pid, err)
		l.Close()
		close(p.done)
	}()

	actx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-actx.Done():
		}
	}()
	conn, err := varnishadm.Accept(actx, l, secret)
	if err != nil {
		p.Kill()
		<-p.done
		return nil, fmt.Errorf("wait for varnishd's admin connection: %w (%v); last output:\n%s", err, p.err, p.tail.String())
	}
	p.Admin = conn
	return p, nil
}

// Args returns varnishd's command line for cfg, the admin listener address,
// the secret file and the boot VCL file. varnishd's CLI is the reverse admin
// connection (-M) only: -T none, for without -T varnishd listens for CLI
// connections on a random loopback port, open to every process of the pod
// that can read the secret.
func Args(cfg Config, adminAddr, secretFile, bootFile string) []string {
	args := []string{"-F", "-n", cfg.WorkDir}
	for _, l := range cfg.Listeners {
		args = append(args, "-a", l.Arg())
	}
	if cfg.GhostAdminAddr != "" {
		args = append(args, "-a", GhostAdminSocket+"="+cfg.GhostAdminAddr)
	}
	args = append(args, "-M", adminAddr, "-T", "none", "-S", secretFile, "-f", bootFile)
	for _, s := range cfg.Storage {
		args = append(args, "-s", s)
	}
	if cfg.ThreadPoolStack != "" {
		args = append(args, "-p", "thread_pool_stack="+cfg.ThreadPoolStack)
	}
	for _, p := range cfg.Params {
		args = append(args, "-p", p)
	}
	return args
}

// PrepareWorkDir creates dir (mode 0755: varnishd compiles VCL as user
// vcache, which must read it), writes a new random admin secret (mode 0600)
// and the boot VCL into it, and returns their paths and the secret.
func PrepareWorkDir(dir string) (secretFile, bootFile string, secret []byte, err error) {
	if dir == "" {
		return "", "", nil, errors.New("varnishd work dir is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", nil, fmt.Errorf("create varnishd work dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", "", nil, fmt.Errorf("make varnishd work dir readable: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", nil, fmt.Errorf("generate admin secret: %w", err)
	}
	secret = []byte(hex.EncodeToString(raw) + "\n")
	secretFile = filepath.Join(dir, "chaperone.secret")
	os.Remove(secretFile) // WriteFile keeps the mode of an existing file
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		return "", "", nil, fmt.Errorf("write admin secret: %w", err)
	}
	bootFile = filepath.Join(dir, "boot.vcl")
	if err := os.WriteFile(bootFile, []byte(BootVCL), 0o644); err != nil {
		return "", "", nil, fmt.Errorf("write boot VCL: %w", err)
	}
	return secretFile, bootFile, secret, nil
}

// WorkDir is varnishd's working directory (-n), for varnishstat -n.
func (p *Process) WorkDir() string { return p.workDir }

// Pid is the manager's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when varnishd has exited; Err then says how.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is why varnishd exited; nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// AcceptAdmin waits for the manager to connect again and returns the new
// admin connection. The manager reconnects (-M) when its connection is
// closed, as the chaperone's is after a command failed mid-answer
// (varnishadm.ErrBroken). It fails once varnishd has exited or ctx ends.
func (p *Process) AcceptAdmin(ctx context.Context) (*varnishadm.Conn, error) {
	return varnishadm.Accept(ctx, p.adminListener, p.secret)
}

// Kill kills varnishd's process group (manager and cache child).
func (p *Process) Kill() { syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// Stop ends varnishd: SIGTERM to the manager (which stops the child), then
// SIGKILL to the process group if it has not exited within timeout.
func (p *Process) Stop(timeout time.Duration) {
	p.stopping.Store(true)
	if p.Admin != nil {
		p.Admin.Close()
	}
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
		<-p.done
	}
	// a child left behind by a killed manager
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// ChildPids returns the pids of the manager's children (the cache child).
func (p *Process) ChildPids() ([]int, error) {
	return childPids(p.cmd.Process.Pid)
}

func childPids(pid int) ([]int, error) {
	// Each thread lists the children it forked.
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("read children of pid %d: no /proc/%d/task/*/children (%v)", pid, pid, err)
	}
	var pids []int
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			continue // the thread has exited
		}
		for _, f := range strings.Fields(string(data)) {
			var n int
			if _, err := fmt.Sscan(f, &n); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids, nil
}

func (p *Process) logLines(logger *slog.Logger, stream string, r io.Reader) {
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, r) // keep the pipe drained after a too long line
	}()
	out := &outputLog{logger: logger, stream: stream, stopping: p.stopping.Load}
	var quiet <-chan time.Time
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				out.flush()
				return
			}
			if strings.TrimSpace(line) != "" {
				p.tail.add(line)
			}
			out.line(line)
			quiet = nil
			if out.panic != nil {
				quiet = time.After(panicQuiet)
			}
		case <-quiet:
			// the dump has ended; nothing followed it
			out.flush()
			quiet = nil
		}
	}
}

// panicQuiet is how long after its last line a panic dump is taken as
// complete when no other manager message follows it.
const panicQuiet = time.Second

// outputLog turns varnishd's output into log records. In the foreground
// (-F) the manager writes its messages as "Level: text" lines (Error,
// Info, Debug, ...); their level becomes the record's. A cache child panic
// is one message of many lines ("Error: Child (N) Panic at: ..." followed
// by the assertion, backtrace, threads and pools): it becomes one ERROR
// record whose "panic" attribute holds the whole dump, not one record per
// line. "Manager got SIGTERM" is INFO when the chaperone asked for the stop
// (Stop), a WARN otherwise.
type outputLog struct {
	logger   *slog.Logger
	stream   string
	stopping func() bool
	panic    []string // the dump being collected, nil when none
}

// managerLevels maps the manager's message prefixes to log levels.
var managerLevels = map[string]slog.Level{
	"Error":    slog.LevelError,
	"Security": slog.LevelWarn,
	"Warning":  slog.LevelWarn,
	"Info":     slog.LevelInfo,
	"Debug":    slog.LevelInfo, // child starts and stops, version: rare and useful
	"Cli":      slog.LevelDebug,
}

// managerMessage splits "Level: text" into its level and text; ok is false
// for a line without a known prefix.
func managerMessage(line string) (prefix, text string, ok bool) {
	prefix, text, found := strings.Cut(line, ": ")
	if !found {
		return "", line, false
	}
	_, ok = managerLevels[prefix]
	return prefix, text, ok
}

func (o *outputLog) line(line string) {
	prefix, text, managed := managerMessage(line)
	if o.panic != nil {
		if !managed {
			o.panic = append(o.panic, line)
			return
		}
		o.flush()
	}
	if strings.TrimSpace(line) == "" {
		return
	}
	if managed && strings.Contains(text, "Panic at:") {
		o.panic = []string{text}
		return
	}
	attrs := []any{"source", "varnishd", "stream", o.stream}
	level := slog.LevelInfo
	switch {
	case managed:
		level = managerLevels[prefix]
		attrs = append(attrs, "varnishd_level", prefix)
		if strings.HasPrefix(text, "Manager got SIG") {
			// The manager stops on SIGTERM or SIGINT: the chaperone's
			// Stop, or someone else.
			level = slog.LevelWarn
			if o.stopping() {
				level = slog.LevelInfo
			}
		}
	default:
		// Lines without a prefix ("Child launched OK", a start error).
		if lower := strings.ToLower(line); strings.Contains(lower, "error") || strings.Contains(lower, "panic") || strings.Contains(lower, "died") {
			level = slog.LevelError
		}
	}
	o.logger.Log(context.Background(), level, text, attrs...)
}

// flush logs the collected panic dump as one record.
func (o *outputLog) flush() {
	if o.panic == nil {
		return
	}
	dump := strings.TrimRight(strings.Join(o.panic, "\n"), "\n ")
	o.panic = nil
	o.logger.Error("varnishd: cache child panic: "+o.panicSummary(dump), "source", "varnishd", "stream", o.stream,
		"varnishd_level", "Error", "panic", dump)
}

// panicSummary is the first line of the dump and the assertion below it:
// "Child (123) Panic at: <date>; Assert error in f(), file line 1:
// Condition(...) not true."
func (o *outputLog) panicSummary(dump string) string {
	lines := strings.Split(dump, "\n")
	parts := []string{}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "version =") || strings.HasPrefix(l, "Backtrace:") {
			break
		}
		parts = append(parts, l)
		if len(parts) == 3 {
			break
		}
	}
	return strings.Join(parts, " ")
}

// lineTail keeps the last max lines of output for error messages.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *lineTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// ChildWatch notices restarts of the cache child from successive values of
// MGT.child_start. Safe for concurrent use.
type ChildWatch struct {
	mu   sync.Mutex
	last uint64
	seen bool
}

// Observe records the current MGT.child_start and reports whether the child
// was started again since the previous observation. The first observation
// never reports a restart.
func (w *ChildWatch) Observe(childStarts uint64) (restarted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	restarted = w.seen && childStarts > w.last
	w.last, w.seen = childStarts, true
	return restarted
}
