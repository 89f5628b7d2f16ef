// Package registrytest runs a real OCI registry on loopback for tests:
// Debian's docker-registry (the CNCF distribution registry) with its
// storage in a temporary directory, serving plain HTTP on 127.0.0.1 and a
// free port.
//
//	reg := registrytest.Start(t)
//	ref := reg.Host + "/varnishgw/gateway:dev"  // 127.0.0.1:PORT/varnishgw/gateway:dev
//
// Tools reach it as an insecure (plain HTTP) registry: skopeo with
// --dest-tls-verify=false / --src-tls-verify=false, crane with --insecure,
// containerd through a mirror entry with an http:// endpoint.
//
// The registry dies with the test binary (parent-death signal) and is
// stopped by t.Cleanup.
package registrytest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DefaultBinary is where Debian's docker-registry package installs the
// registry (listed in this package's debian-packages.txt).
const DefaultBinary = "/usr/bin/docker-registry"

// Registry is a running registry.
type Registry struct {
	// Host is "127.0.0.1:PORT", the registry part of image references.
	Host string
	// Dir holds the configuration, the log and the storage.
	Dir string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts a registry for the test and stops it when the test ends.
// The binary is $VARNISHGW_DOCKER_REGISTRY or DefaultBinary.
func Start(t testing.TB) *Registry {
	t.Helper()
	bin := os.Getenv("VARNISHGW_DOCKER_REGISTRY")
	if bin == "" {
		bin = DefaultBinary
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := StartIn(ctx, t.TempDir(), bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stop registry: %v", err)
		}
	})
	return r
}

// StartIn starts the registry binary bin with its files in dir (which must
// exist) and waits until it answers. Stop it with Stop.
func StartIn(ctx context.Context, dir, bin string) (*Registry, error) {
	if _, err := exec.LookPath(bin); err != nil {
		return nil, fmt.Errorf("registry binary %s: %w; install Debian's docker-registry package (make setup does)", bin, err)
	}
	var last error
	// A free port can be taken between choosing and binding it: try again.
	for attempt := 0; attempt < 3; attempt++ {
		r, err := start(ctx, dir, bin)
		if err == nil {
			return r, nil
		}
		last = err
	}
	return nil, last
}

func start(ctx context.Context, dir, bin string) (*Registry, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	storage := filepath.Join(dir, "storage")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.yml")
	// The distribution registry's configuration format, version 0.1.
	body := fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, storage, host)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		return nil, fmt.Errorf("write registry config: %w", err)
	}
	logPath := filepath.Join(dir, "registry.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", config)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start registry %s: %w", bin, err)
	}
	r := &Registry{Host: host, Dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		logFile.Close()
		close(r.done)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-r.done:
			return nil, fmt.Errorf("registry on %s exited during start (%v): %s", host, r.err, tail(logPath))
		case <-ctx.Done():
			_ = r.Stop() // it failed to start: that is the error returned
			return nil, fmt.Errorf("registry on %s not ready: %w: %s", host, ctx.Err(), tail(logPath))
		case <-tick.C:
			// GET /v2/ is the registry API's version check: 200 when up.
			resp, err := client.Get("http://" + host + "/v2/")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
	}
}

// Stop stops the registry: SIGTERM, then SIGKILL after 10 seconds.
func (r *Registry) Stop() error {
	select {
	case <-r.done:
		return nil
	default:
	}
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	}
	var exit *exec.ExitError
	if r.err != nil && (!errors.As(r.err, &exit) || exit.Exited()) {
		return fmt.Errorf("registry on %s: %w", r.Host, r.err)
	}
	return nil
}

// Log returns the registry's log so far.
func (r *Registry) Log() string {
	data, _ := os.ReadFile(filepath.Join(r.Dir, "registry.log"))
	return string(data)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// Skopeo runs Debian's skopeo with args (5 minutes at most) and returns its
// output, trimmed; it fails the test when skopeo fails.
func Skopeo(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "skopeo", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
