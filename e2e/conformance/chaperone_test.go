package conformance

import (
	"bytes"
	"context"
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
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/logcheck"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// chaperoneBin and ghostVMOD are built once by TestMain.
var chaperoneBin, ghostVMOD string

func TestMain(m *testing.M) {
	dir, err := buildOnce()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.Main(m, testenv.AfterTests(func() { os.RemoveAll(dir) }))
}

// buildOnce builds the ghost VMOD and the chaperone binary into a new
// world-readable directory (varnishd compiles VCL as user vcache), with
// -race when the tests run with it.
func buildOnce() (string, error) {
	dir, err := os.MkdirTemp("", "varnishgw-conformance-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return dir, err
	}
	if ghostVMOD, err = varnishdtest.BuildGhost(dir); err != nil {
		return dir, fmt.Errorf("build the ghost VMOD (run make setup for its build dependencies): %w", err)
	}
	chaperoneBin = filepath.Join(dir, "chaperone")
	build := []string{"build", "-o", chaperoneBin}
	if raceBuild {
		build = append(build, "-race")
	}
	cmd := exec.Command("go", append(build, "./chaperone")...)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("build the chaperone: %w\n%s", err, out)
	}
	return dir, nil
}

// chaperone is a running chaperone binary.
type chaperone struct {
	t          testing.TB
	cmd        *exec.Cmd
	healthAddr string
	out        *syncBuffer
	exited     chan struct{}
	exitErr    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launchChaperone runs the chaperone binary in supervise mode with main.vcl
// and ghost.json in dir (world-readable) routing app.example.com to be,
// then extra (later flags win), without waiting for readiness. An empty
// listenAddr gives no --listen (extra names the ports). The chaperone is
// killed when t ends, and its log records are checked.
func launchChaperone(t testing.TB, dir string, be *httptest.Server, listenAddr string, extra ...string) *chaperone {
	t.Helper()
	c := &chaperone{
		t: t, healthAddr: varnishdtest.FreeAddr(t),
		out: &syncBuffer{}, exited: make(chan struct{}),
	}
	vclPath, ghostPath := filepath.Join(dir, "main.vcl"), filepath.Join(dir, "ghost.json")
	writeFile(t, ghostPath, ghostJSON(be.URL))
	writeFile(t, vclPath, varnishdtest.MainVCL(ghostVMOD, ghostPath, `set resp.http.X-VCL = "v1";`))
	args := []string{
		"--workdir", filepath.Join(dir, "work"),
		"--listen-host", "127.0.0.1",
		"--admin-addr", "127.0.0.1:0",
		"--ghost-admin-addr", varnishdtest.FreeAddr(t),
		"--health-addr", c.healthAddr,
		"--vcl", vclPath,
		"--ghost-json", ghostPath,
		"--varnishd", varnishdtest.Bin(t),
		"--varnishstat", varnishdtest.StatBin(t),
		"--storage", "malloc,32m",
		"--param", "thread_pool_min=5", "--param", "thread_pools=1",
		"--stats-interval", "500ms",
		"--log-level", "debug",
	}
	if listenAddr != "" {
		args = append(args, "--listen", strconv.Itoa(varnishdtest.Port(t, listenAddr)))
	}
	c.cmd = exec.Command(chaperoneBin, append(args, extra...)...)
	c.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exitErr = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		varnishdtest.KillTree(c.cmd.Process.Pid)
		<-c.exited
		logcheck.Records(t, c.out.String())
		if t.Failed() {
			t.Logf("chaperone output:\n%s", c.out.String())
		}
	})
	return c
}

func (c *chaperone) waitFor(what string, timeout time.Duration, ok func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		select {
		case <-c.exited:
			c.t.Fatalf("chaperone exited (%v) while waiting for %s", c.exitErr, what)
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *chaperone) health(path string) (int, string) {
	resp, err := http.Get("http://" + c.healthAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// ghostJSON routes app.example.com to the backend at backendURL: the
// routing a chaperone starts with before its own.
func ghostJSON(backendURL string) string {
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(backendURL, "http://"))
	return fmt.Sprintf(`{"version": 2, "backends": [
  {"name": "app", "endpoints": [{"address": %q, "port": %s}]}
], "vhosts": [
  {"hostname": "app.example.com", "routes": [
    {"name": "app", "match": {"path": {"type": "PathPrefix", "value": "/"}},
     "backends": [{"backend": "app"}]}]}
]}`, host, port)
}

func backend(t testing.TB, body string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// providerVCL plays the provider's part in writing main.vcl: it records
// vcl's digest on the Gateway (gwruntime.VCLDigestAnnotation, which the
// pods check) and returns the Gateway's VCL ConfigMap to write, labelled
// like the provider's runtime objects.
func providerVCL(t testing.TB, cp *testenv.ControlPlane, gw *gatewayv1.Gateway, vcl string) *corev1.ConfigMap {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, gwruntime.VCLDigestAnnotation, gwruntime.VCLDigest(vcl))
	if _, err := cp.Gateway.GatewayV1().Gateways(gw.Namespace).Patch(context.Background(), gw.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("record the VCL digest on Gateway %s/%s: %v", gw.Namespace, gw.Name, err)
	}
	ref := routing.ObjectRef{Namespace: gw.Namespace, Name: gw.Name}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: gwruntime.VCLConfigMapName(ref), Labels: gwruntime.Labels(ref)},
		Data:       map[string]string{gwruntime.VCLDataKey: vcl},
	}
}

// tlsSecret is a kubernetes.io/tls Secret demo/name with a self-signed
// certificate for host valid from notBefore to notAfter; serial names it.
func tlsSecret(t *testing.T, name, host string, notBefore, notAfter time.Time) (*corev1.Secret, *big.Int) {
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
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}),
		},
	}, serial
}

func ptr[T any](v T) *T { return &v }
