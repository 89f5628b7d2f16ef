// Package varnishdtest starts a real varnishd for tests, with everything a
// test needs to clean up: the process group is killed when the test ends.
package varnishdtest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/toolsenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// EnvVarnish is the environment variable that selects the Varnish the tests
// run against:
//   - empty: this machine's (Debian 12: 7.1), varnishd and varnishstat from
//     PATH or /usr/sbin, ghost built by make -C ghost all;
//   - "7.7": Debian 13's, the gateway image's, unpacked by scripts/varnish77.sh:
//     the programs from VARNISHGW_VARNISH77_BIN (the environment, else
//     bin/tools.env), ghost built by make -C ghost all VARNISH=7.7.
//
// make test runs the packages that talk to varnishd once with each
// (the GNUmakefile's test-go-77).
const EnvVarnish = "VARNISHGW_TEST_VARNISH"

type selection struct {
	version string // "" (this machine's) or "7.7"
	binDir  string // "" (PATH, /usr/sbin) or the wrappers' directory
}

var (
	selectOnce sync.Once
	selected   selection
	selectErr  error
)

func selectVarnish() (selection, error) {
	selectOnce.Do(func() { selected, selectErr = readSelection() })
	return selected, selectErr
}

func readSelection() (selection, error) {
	switch v := os.Getenv(EnvVarnish); v {
	case "":
		return selection{}, nil
	case "7.7":
		const key = "VARNISHGW_VARNISH77_BIN"
		if err := toolsenv.Missing(key); err != nil {
			return selection{}, fmt.Errorf("%s=7.7: %w (scripts/varnish77.sh unpacks Debian 13's Varnish 7.7)", EnvVarnish, err)
		}
		dir := os.Getenv(key)
		if _, err := os.Stat(filepath.Join(dir, "varnishd")); err != nil {
			return selection{}, fmt.Errorf("%s=7.7: %s=%s has no varnishd (%v): run make setup", EnvVarnish, key, dir, err)
		}
		return selection{version: v, binDir: dir}, nil
	default:
		return selection{}, fmt.Errorf("%s=%q: want empty (this machine's Varnish) or 7.7", EnvVarnish, v)
	}
}

// Varnish returns the Varnish version the tests run against (EnvVarnish):
// "" for this machine's, or "7.7".
func Varnish(t testing.TB) string {
	t.Helper()
	s, err := selectVarnish()
	if err != nil {
		t.Fatal(err)
	}
	return s.version
}

// VersionString is what `varnishd -V` and the CLI banner of the selected
// Varnish contain: "varnish-7.7." for 7.7, "varnish-7." for this machine's.
func VersionString(t testing.TB) string {
	t.Helper()
	if v := Varnish(t); v != "" {
		return "varnish-" + v + "."
	}
	return "varnish-7."
}

// Bin returns the path of the selected varnishd or fails the test.
func Bin(t testing.TB) string {
	t.Helper()
	return find(t, "varnishd")
}

// AdmBin returns the path of the selected varnishadm or fails the test.
func AdmBin(t testing.TB) string {
	t.Helper()
	return find(t, "varnishadm")
}

// StatBin returns the path of the selected varnishstat or fails the test.
func StatBin(t testing.TB) string {
	t.Helper()
	return find(t, "varnishstat")
}

func find(t testing.TB, name string) string {
	s, err := selectVarnish()
	if err != nil {
		t.Fatal(err)
	}
	if s.binDir != "" {
		p := filepath.Join(s.binDir, name)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("Varnish %s: %v: run `make setup`", s.version, err)
		}
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s not found: run `make setup`", name)
	return ""
}

// Dir returns a temporary directory that user vcache can read (varnishd
// compiles VCL with dropped privileges), parents included.
func Dir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// FreeAddr returns a free loopback address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	// Ports below the kernel's ephemeral range (32768-60999 by default):
	// a port from a bind to :0 could be handed out again by the next bind
	// to :0 in any process (the chaperone's own admin listener, say) before
	// the server this address is for binds it.
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(12000)))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free loopback port between 20000 and 32000")
	return ""
}

// Port returns the port of a host:port address.
func Port(t testing.TB, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Start runs varnishd with cfg, filling in Bin, WorkDir, Logger and a small
// thread pool when empty, and stops it when the test ends.
func Start(t testing.TB, cfg varnishd.Config) *varnishd.Process {
	t.Helper()
	if cfg.Bin == "" {
		cfg.Bin = Bin(t)
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(Dir(t), "work")
	}
	if cfg.Logger == nil {
		cfg.Logger = Logger(t)
	}
	if len(cfg.Params) == 0 {
		cfg.Params = []string{"thread_pool_min=5", "thread_pools=1"}
	}
	if len(cfg.Storage) == 0 {
		cfg.Storage = []string{"malloc,32m"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := varnishd.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start varnishd: %v", err)
	}
	t.Cleanup(func() { p.Stop(15 * time.Second) })
	return p
}

// Logger returns a JSON logger writing to the test log (kept until the test
// ends, printed on failure or with -v).
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// KillTree kills pid's process group and the process groups of all its
// descendants. A parent-death signal does not reach varnishd: its manager
// changes credentials (jail), which clears the signal, so a varnishd whose
// chaperone is killed outside a pod (where the chaperone is PID 1 and the
// kernel ends the namespace) would keep running.
func KillTree(pid int) {
	tree := descendants(pid)
	syscall.Kill(-pid, syscall.SIGKILL)
	syscall.Kill(pid, syscall.SIGKILL)
	for _, p := range tree {
		syscall.Kill(-p, syscall.SIGKILL)
		syscall.Kill(p, syscall.SIGKILL)
	}
}

func descendants(pid int) []int {
	var out []int
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(field); err == nil {
				out = append(out, n)
				out = append(out, descendants(n)...)
			}
		}
	}
	return out
}

// FindHostIP is the machine's first non-loopback, non-link-local IPv4
// address, for test backends whose address goes into an EndpointSlice: the
// API server refuses loopback addresses there.
func FindHostIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("list interface addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("this machine has no non-loopback IPv4 address; the API server refuses loopback addresses in EndpointSlices, so local backends need one (add one, for example to a dummy interface)")
}

// HostIP is FindHostIP for tests: it fails the test when there is none.
func HostIP(t testing.TB) string {
	t.Helper()
	ip, err := FindHostIP()
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

// Descendants returns the process IDs below pid (children, their children,
// ...), read from /proc.
func Descendants(pid int) []int { return descendants(pid) }

// NcsaBin returns the path of the selected varnishncsa or fails the test.
func NcsaBin(t testing.TB) string {
	t.Helper()
	return find(t, "varnishncsa")
}

// ListeningTCP returns the TCP sockets in state LISTEN that the processes
// pids hold, from /proc/PID/fd and /proc/net/tcp{,6}.
func ListeningTCP(t testing.TB, pids []int) []netip.AddrPort {
	t.Helper()
	inodes := map[string]bool{}
	for _, pid := range pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			if os.IsNotExist(err) {
				continue // a short-lived child (varnishstat) ended
			}
			t.Fatalf("read the sockets of pid %d (the test needs root to read varnishd's): %v", pid, err)
		}
		for _, fd := range fds {
			link, _ := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
			if ino, ok := strings.CutPrefix(link, "socket:["); ok {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	var out []netip.AddrPort
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			ap, err := parseProcAddr(f[1])
			if err != nil {
				t.Fatalf("%s: %q: %v", file, f[1], err)
			}
			out = append(out, ap)
		}
	}
	return out
}

// parseProcAddr parses "0100007F:1F90": the address in 32-bit words of host
// (little-endian) byte order, the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no port")
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address")
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
