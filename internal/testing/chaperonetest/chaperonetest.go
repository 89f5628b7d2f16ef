// Package chaperonetest runs the real chaperone binary in tests: it builds
// the binary and the ghost VMOD once per test process, and starts
// chaperones in supervise mode in front of a real varnishd, with a
// main.vcl and a ghost.json that route app.example.com to a test backend.
package chaperonetest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/logcheck"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// Build is what BuildIn built: the chaperone binary and the ghost VMOD.
type Build struct {
	// Chaperone is the path of the chaperone binary.
	Chaperone string
	// GhostVMOD is the path of the ghost VMOD (libvmod_ghost.so).
	GhostVMOD string
}

// BuildIn builds the ghost VMOD and the chaperone binary into dir, which it
// makes world-readable (varnishd compiles VCL as user vcache), with -race
// when race is set.
func BuildIn(dir string, race bool) (*Build, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	ghost, err := varnishdtest.BuildGhost(dir)
	if err != nil {
		return nil, fmt.Errorf("build the ghost VMOD (run make setup for its build dependencies): %w", err)
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return nil, fmt.Errorf("find the module's directory: %w", err)
	}
	b := &Build{Chaperone: filepath.Join(dir, "chaperone"), GhostVMOD: ghost}
	args := []string{"build", "-o", b.Chaperone}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./chaperone")...)
	cmd.Dir = strings.TrimSpace(string(root))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the chaperone: %w\n%s", err, out)
	}
	return b, nil
}

// Chaperone is a running chaperone binary.
type Chaperone struct {
	T          testing.TB
	Cmd        *exec.Cmd
	Dir        string // main.vcl, ghost.json and the workdir
	ListenAddr string // the HTTP listener; "" for none
	HealthAddr string
	GhostAdmin string // ghost's admin socket
	VCLPath    string
	GhostPath  string
	Out        *SyncBuffer // stdout and stderr
	Stdout     *SyncBuffer // stdout alone (the access log), also in Out
	Exited     chan struct{}
	ExitErr    error // set when Exited is closed
}

// SyncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Launch runs the chaperone binary of b in supervise mode with main.vcl and
// ghost.json in dir (world-readable) routing app.example.com to be (X-VCL
// "v1" on every answer), then the flags extra (later flags win), without
// waiting for readiness. An empty listenAddr gives no --listen (extra
// names the ports). The chaperone is killed when t ends, and its log
// records are checked (logcheck).
func Launch(t testing.TB, b *Build, dir string, be *httptest.Server, listenAddr string, extra ...string) *Chaperone {
	t.Helper()
	c := &Chaperone{
		T: t, Dir: dir,
		ListenAddr: listenAddr,
		HealthAddr: varnishdtest.FreeAddr(t),
		GhostAdmin: varnishdtest.FreeAddr(t),
		VCLPath:    filepath.Join(dir, "main.vcl"),
		GhostPath:  filepath.Join(dir, "ghost.json"),
		Out:        &SyncBuffer{},
		Stdout:     &SyncBuffer{},
		Exited:     make(chan struct{}),
	}
	WriteFile(t, c.GhostPath, GhostJSON(be.URL))
	WriteFile(t, c.VCLPath, MainVCL(b.GhostVMOD, c.GhostPath, "v1"))
	args := []string{
		"--workdir", filepath.Join(dir, "work"),
		"--listen-host", "127.0.0.1",
		"--admin-addr", "127.0.0.1:0",
		"--ghost-admin-addr", c.GhostAdmin,
		"--health-addr", c.HealthAddr,
		"--vcl", c.VCLPath,
		"--ghost-json", c.GhostPath,
		"--varnishd", varnishdtest.Bin(t),
		"--varnishstat", varnishdtest.StatBin(t),
		"--storage", "malloc,32m",
		"--param", "thread_pool_min=5", "--param", "thread_pools=1",
		"--stats-interval", "500ms",
		"--log-level", "debug",
	}
	if c.ListenAddr != "" {
		args = append(args, "--listen", strconv.Itoa(varnishdtest.Port(t, c.ListenAddr)))
	}
	c.Cmd = exec.Command(b.Chaperone, append(args, extra...)...)
	c.Cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	c.Cmd.Stdout, c.Cmd.Stderr = io.MultiWriter(c.Stdout, c.Out), c.Out
	c.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.ExitErr = c.Cmd.Wait(); close(c.Exited) }()
	t.Cleanup(func() {
		varnishdtest.KillTree(c.Cmd.Process.Pid)
		<-c.Exited
		logcheck.Records(t, c.Out.String())
		if t.Failed() {
			t.Logf("chaperone output:\n%s", c.Out.String())
		}
	})
	return c
}

// WaitFor polls ok every 100 ms until it holds, and fails the test when
// timeout passes first or the chaperone exits.
func (c *Chaperone) WaitFor(what string, timeout time.Duration, ok func() bool) {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		select {
		case <-c.Exited:
			c.T.Fatalf("chaperone exited (%v) while waiting for %s", c.ExitErr, what)
		default:
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Health is the status and body of a GET of path on the health address
// (/healthz, /readyz, /metrics); 0 and the error when it cannot be sent.
func (c *Chaperone) Health(path string) (int, string) {
	resp, err := http.Get("http://" + c.HealthAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// WriteFile replaces path with content at once (a rename), so that a
// watcher never reads half of it.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// MainVCL is a main.vcl in which ghost (the VMOD at ghostVMOD, reading
// ghostJSON) routes everything, and X-VCL names the VCL that answered.
func MainVCL(ghostVMOD, ghostJSON, tag string) string {
	return varnishdtest.MainVCL(ghostVMOD, ghostJSON, fmt.Sprintf("set resp.http.X-VCL = %q;", tag))
}

// GhostJSON routes app.example.com to the backend at backendURL: the
// routing a chaperone starts with.
func GhostJSON(backendURL string) string {
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(backendURL, "http://"))
	return fmt.Sprintf(`{"version": 2, "backends": [
  {"name": "app", "endpoints": [{"address": %q, "port": %s}]}
], "vhosts": [
  {"hostname": "app.example.com", "routes": [
    {"name": "app", "match": {"path": {"type": "PathPrefix", "value": "/"}},
     "backends": [{"backend": "app"}]}]}
]}`, host, port)
}

// Backend is a test HTTP server that answers every request with body.
func Backend(t testing.TB, body string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// TLSSecret is a kubernetes.io/tls Secret ns/name with a self-signed
// certificate for host valid from notBefore to notAfter, and the
// certificate's serial number.
func TLSSecret(t testing.TB, ns, name, host string, notBefore, notAfter time.Time) (*corev1.Secret, *big.Int) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}),
		},
	}, serial
}
