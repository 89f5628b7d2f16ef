package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/logcheck"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

func writeSecrets(t *testing.T, path string, secrets ...*corev1.Secret) {
	t.Helper()
	var docs []string
	for _, s := range secrets {
		b, err := yaml.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	chaperonetest.WriteFile(t, path, strings.Join(docs, "---\n"))
}

// servedSerial is the serial of the certificate addr serves for sni, nil
// when the handshake fails.
func servedSerial(addr, sni string) *big.Int {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return nil
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// httpsSetup is a routing directory for a Gateway demo/edge with an HTTP
// listener on port and an HTTPS listener "https" on tlsPort (Secrets app
// and other, in certificates.yaml), a route for app.example.com to be, and
// a short --tls-dir.
type httpsSetup struct {
	dir, routingDir, tlsDir, secretsPath string
	appSecret, otherSecret               *corev1.Secret
	appSerial, otherSerial               *big.Int
}

func newHTTPSSetup(t *testing.T, beURL string, port, tlsPort int) *httpsSetup {
	t.Helper()
	dir := varnishdtest.Dir(t)
	routingDir := filepath.Join(dir, "routing")
	if err := os.Mkdir(routingDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Unix socket paths are short: not under t.TempDir.
	tlsDir, err := os.MkdirTemp("", "chaptls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tlsDir) })
	gw := &gatewayv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "edge", Generation: 1},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnish", Listeners: []gatewayv1.Listener{
			{Name: "http", Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType},
			{Name: "https", Port: gatewayv1.PortNumber(tlsPort), Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
				CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "app"}, {Name: "other"}}}},
		}},
	}
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app", CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}},
			Hostnames:       []gatewayv1.Hostname{"app.example.com"},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: ptr(gatewayv1.PortNumber(80))},
			}}}}},
		},
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "port-80", Port: 80}}}}
	frag, err := routing.Attach(gw, route, &routing.Objects{Services: []*corev1.Service{svc}})
	if err != nil {
		t.Fatal(err)
	}
	fragJSON, err := routing.MarshalFragment(frag)
	if err != nil {
		t.Fatal(err)
	}
	gwYAML, err := yaml.Marshal(gw)
	if err != nil {
		t.Fatal(err)
	}
	chaperonetest.WriteFile(t, filepath.Join(routingDir, "gateway.yaml"), string(gwYAML))
	chaperonetest.WriteFile(t, filepath.Join(routingDir, "app.fragment.json"), string(fragJSON))
	chaperonetest.WriteFile(t, filepath.Join(routingDir, "endpoints.yaml"), "demo/app:80:\n  - "+strings.TrimPrefix(beURL, "http://")+"\n")
	now := time.Now()
	appSecret, appSerial := chaperonetest.TLSSecret(t, "demo", "app", "app.example.com", now.Add(-time.Hour), now.Add(30*24*time.Hour))
	otherSecret, otherSerial := chaperonetest.TLSSecret(t, "demo", "other", "other.example.com", now.Add(-time.Hour), now.Add(10*24*time.Hour))
	secretsPath := filepath.Join(routingDir, "certificates.yaml")
	writeSecrets(t, secretsPath, appSecret, otherSecret)

	return &httpsSetup{dir: dir, routingDir: routingDir, tlsDir: tlsDir, secretsPath: secretsPath,
		appSecret: appSecret, otherSecret: otherSecret, appSerial: appSerial, otherSerial: otherSerial}
}

// TestHTTPSListener runs the chaperone binary with an HTTPS listener whose
// certificates come from Secret manifests in the routing directory: hitch
// terminates TLS (HTTP/2 by ALPN), ghost routes by the request's host, the
// certificate follows SNI and the Secrets' changes, an invalid certificate
// leaves the served one, and SIGTERM drains and stops hitch.
func TestHTTPSListener(t *testing.T) {
	hitch := "/usr/sbin/hitch"
	if _, err := os.Stat(hitch); err != nil {
		t.Fatalf("hitch is not installed (make setup): %v", err)
	}
	be := chaperonetest.Backend(t, "app")
	listen, tlsAddr := varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	port, tlsPort := varnishdtest.Port(t, listen), varnishdtest.Port(t, tlsAddr)
	hs := newHTTPSSetup(t, be.URL, port, tlsPort)
	dir, routingDir, tlsDir, secretsPath := hs.dir, hs.routingDir, hs.tlsDir, hs.secretsPath
	appSerial, otherSerial, otherSecret := hs.appSerial, hs.otherSerial, hs.otherSecret
	now := time.Now()

	c := launchChaperone(t, dir, be, listen, "--routing", "dir", "--routing-dir", routingDir,
		"--tls-listen", strconv.Itoa(tlsPort), "--tls-dir", tlsDir, "--hitch", hitch)
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })

	// HTTP/2 through hitch, routed by ghost.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		ForceAttemptHTTP2: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", tlsAddr)
		},
	}}
	c.WaitFor("HTTPS traffic", 60*time.Second, func() bool {
		resp, err := client.Get("https://app.example.com/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 && string(b) == "app" && resp.Proto != "HTTP/2.0" {
			t.Fatalf("HTTPS answer over %s, want HTTP/2.0", resp.Proto)
		}
		return resp.StatusCode == 200 && string(b) == "app"
	})
	if got := servedSerial(tlsAddr, "app.example.com"); got == nil || got.Cmp(appSerial) != 0 {
		t.Errorf("SNI app.example.com: certificate %v, want %v", got, appSerial)
	}
	if got := servedSerial(tlsAddr, "other.example.com"); got == nil || got.Cmp(otherSerial) != 0 {
		t.Errorf("SNI other.example.com: certificate %v, want %v", got, otherSerial)
	}
	if v := c.metric(`varnishgw_chaperone_tls_certificate_expiry_days{listener="https",secret_name="other",secret_namespace="demo"}`); v < 9.9 || v > 10 {
		t.Errorf("expiry days of the Secret other = %v, want about 10", v)
	}

	// Rotation: the Secret's new certificate is served.
	rotated, rotatedSerial := chaperonetest.TLSSecret(t, "demo", "app", "app.example.com", now.Add(-time.Hour), now.Add(60*24*time.Hour))
	writeSecrets(t, secretsPath, rotated, otherSecret)
	c.WaitFor("the rotated certificate", 30*time.Second, func() bool {
		got := servedSerial(tlsAddr, "app.example.com")
		return got != nil && got.Cmp(rotatedSerial) == 0
	})

	// An expired certificate: logged, counted, the rotated one stays.
	expired, _ := chaperonetest.TLSSecret(t, "demo", "app", "app.example.com", now.Add(-48*time.Hour), now.Add(-time.Hour))
	writeSecrets(t, secretsPath, expired, otherSecret)
	c.WaitFor("the rejected certificate's metric", 30*time.Second, func() bool {
		return c.metric("varnishgw_chaperone_tls_certificates_rejected_total") == 1
	})
	if got := servedSerial(tlsAddr, "app.example.com"); got == nil || got.Cmp(rotatedSerial) != 0 {
		t.Errorf("after an expired certificate: served %v, want the rotated %v", got, rotatedSerial)
	}
	if !strings.Contains(c.Out.String(), `"msg":"certificate not used","component":"tls","secret":"demo/app"`) {
		t.Errorf("no WARN record naming the Secret demo/app")
	}

	// SIGTERM: drained, hitch stopped, exit 0.
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the chaperone did not exit within 60s of SIGTERM")
	}
	if c.ExitErr != nil {
		t.Errorf("exit: %v", c.ExitErr)
	}
	if conn, err := net.DialTimeout("tcp", tlsAddr, time.Second); err == nil {
		conn.Close()
		t.Error("the HTTPS port still accepts connections after the chaperone exited")
	}
}

// httpsGet sends GET https://app.example.com/ to addr over HTTP/2 on a new
// connection and returns the protocol and body ("" and the error's text
// when it fails).
func httpsGet(addr string) (proto, body string) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		ForceAttemptHTTP2: true,
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		},
	}}
	resp, err := client.Get("https://app.example.com/")
	if err != nil {
		return "", err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Proto, string(b)
}

// TestSidecarHTTPS runs the chaperone in sidecar mode with an HTTPS port
// beside a varnishd started with the varnish container's command line
// (varnishd.Args with varnishd.TLSListener and feature=+http2): the
// chaperone's hitch reaches the other varnishd's socket in the shared
// --tls-dir, and after that varnishd restarts, HTTPS traffic flows again.
func TestSidecarHTTPS(t *testing.T) {
	be := chaperonetest.Backend(t, "app")
	listen, tlsAddr := varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	port, tlsPort := varnishdtest.Port(t, listen), varnishdtest.Port(t, tlsAddr)
	hs := newHTTPSSetup(t, be.URL, port, tlsPort)
	shared := filepath.Join(hs.dir, "shared")
	secretFile, bootFile, _, err := varnishd.PrepareWorkDir(shared)
	if err != nil {
		t.Fatal(err)
	}
	workDir := filepath.Join(hs.dir, "work")
	c := &chaperone{&chaperonetest.Chaperone{T: t, Dir: hs.dir, ListenAddr: listen, HealthAddr: varnishdtest.FreeAddr(t), GhostAdmin: varnishdtest.FreeAddr(t),
		VCLPath: filepath.Join(hs.dir, "main.vcl"), GhostPath: filepath.Join(hs.dir, "ghost.json"),
		Out: &chaperonetest.SyncBuffer{}, Stdout: &chaperonetest.SyncBuffer{}, Exited: make(chan struct{})}}
	chaperonetest.WriteFile(t, c.GhostPath, chaperonetest.GhostJSON(be.URL))
	chaperonetest.WriteFile(t, c.VCLPath, mainVCL(c.GhostPath, "side"))
	adminAddr := varnishdtest.FreeAddr(t)
	c.Cmd = exec.Command(build.Chaperone,
		"--mode=sidecar", "--secret-file", secretFile, "--workdir", workDir,
		"--admin-addr", adminAddr, "--ghost-admin-addr", c.GhostAdmin, "--health-addr", c.HealthAddr,
		"--drain-socket", filepath.Join(hs.dir, "drain.sock"), "--vcl", c.VCLPath, "--ghost-json", c.GhostPath,
		"--varnishstat", varnishdtest.StatBin(t), "--stats-interval", "500ms",
		"--routing", "dir", "--routing-dir", hs.routingDir, "--listen-host", "127.0.0.1",
		"--tls-listen", strconv.Itoa(tlsPort), "--tls-dir", hs.tlsDir, "--hitch", "/usr/sbin/hitch")
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
	varnishContainer := func() *exec.Cmd {
		cfg := varnishd.Config{
			WorkDir: workDir,
			Listeners: []varnishd.Listener{
				{Name: "port-" + strconv.Itoa(port), Addr: listen},
				varnishd.TLSListener(hs.tlsDir, tlsPort),
			},
			GhostAdminAddr: c.GhostAdmin,
			Storage:        []string{"malloc,32m"},
			Params:         []string{"thread_pool_min=5", "thread_pools=1", "feature=+http2"},
		}
		vd := exec.Command(varnishdtest.Bin(t), varnishd.Args(cfg, adminAddr, secretFile, bootFile)...)
		vdOut := &chaperonetest.SyncBuffer{}
		vd.Stdout, vd.Stderr = vdOut, vdOut
		vd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := vd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			varnishdtest.KillTree(vd.Process.Pid)
			_ = vd.Wait()
			if t.Failed() {
				t.Logf("varnishd output:\n%s", vdOut.String())
			}
		})
		return vd
	}
	time.Sleep(time.Second) // the chaperone waits for varnishd
	if code, _ := c.Health("/readyz"); code == 200 {
		t.Error("ready before varnishd connected")
	}
	vd := varnishContainer()
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	c.WaitFor("HTTPS traffic", 60*time.Second, func() bool { _, body := httpsGet(tlsAddr); return body == "app" })
	if proto, _ := httpsGet(tlsAddr); proto != "HTTP/2.0" {
		t.Errorf("HTTPS over %s, want HTTP/2.0", proto)
	}
	if got := servedSerial(tlsAddr, "other.example.com"); got == nil || got.Cmp(hs.otherSerial) != 0 {
		t.Errorf("SNI other.example.com: certificate %v, want %v", got, hs.otherSerial)
	}
	hitchStarts := strings.Count(c.Out.String(), `"msg":"hitch started"`)

	// The varnish container restarts: its new socket takes hitch's
	// connections again.
	varnishdtest.KillTree(vd.Process.Pid)
	_ = vd.Wait()
	c.WaitFor("the old varnishd to release the listener", 90*time.Second, func() bool {
		l, err := net.Listen("tcp", listen)
		if err == nil {
			l.Close()
		}
		return err == nil
	})
	varnishContainer()
	c.WaitFor("the chaperone to accept the new varnishd", 90*time.Second, func() bool {
		return strings.Contains(c.Out.String(), "varnishd connected again")
	})
	c.WaitFor("HTTPS traffic through the new varnishd", 60*time.Second, func() bool { _, body := httpsGet(tlsAddr); return body == "app" })
	if n := strings.Count(c.Out.String(), `"msg":"hitch started"`); n != hitchStarts {
		t.Errorf("hitch started %d times, want it kept running across varnishd's restart (%d)", n, hitchStarts)
	}
}

// TestProxyProtocol: with --proxy-protocol, a load balancer's PROXY header
// (v1 here) starts every connection, on the HTTP listener (varnishd reads
// it) and on the HTTPS listener (hitch passes it on to varnishd): the
// backend sees the client's address in X-Forwarded-For and the scheme of
// the client's connection in X-Forwarded-Proto. A connection without the
// header is not served.
func TestProxyProtocol(t *testing.T) {
	hitch := "/usr/sbin/hitch"
	if _, err := os.Stat(hitch); err != nil {
		t.Fatalf("hitch is not installed (make setup): %v", err)
	}
	be := backendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s", r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"))
	})
	listen, tlsAddr := varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	port, tlsPort := varnishdtest.Port(t, listen), varnishdtest.Port(t, tlsAddr)
	hs := newHTTPSSetup(t, be.URL, port, tlsPort)
	// The gateway's own main.vcl, which sets X-Forwarded-Proto, with the
	// load balancer (here the test, on loopback) as the one PROXY source,
	// as the provider renders it for proxy_protocol = true.
	vcl := filepath.Join(hs.dir, "gateway.vcl")
	chaperonetest.WriteFile(t, vcl, mainvcl.Render(mainvcl.Options{GhostJSON: filepath.Join(hs.dir, "ghost.json"), VMOD: build.GhostVMOD,
		ProxySources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	c := launchChaperone(t, hs.dir, be, listen, "--routing", "dir", "--routing-dir", hs.routingDir,
		"--tls-listen", strconv.Itoa(tlsPort), "--tls-dir", hs.tlsDir, "--hitch", hitch, "--proxy-protocol", "--vcl", vcl)
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })

	// get sends one request on a new connection to addr that starts with
	// header, then TLS when tlsOn, and returns the body ("" on failure).
	get := func(addr, header string, tlsOn bool) (string, error) {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, header); err != nil {
			return "", err
		}
		rw := conn
		if tlsOn {
			tc := tls.Client(conn, &tls.Config{ServerName: "app.example.com", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
			if err := tc.Handshake(); err != nil {
				return "", fmt.Errorf("TLS handshake: %w", err)
			}
			rw = tc
		}
		if _, err := io.WriteString(rw, "GET / HTTP/1.1\r\nHost: app.example.com\r\nConnection: close\r\n\r\n"); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(rw), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("status %s: %s", resp.Status, b)
		}
		return string(b), err
	}
	for _, tc := range []struct {
		name, addr, header, want string
		tls                      bool
	}{
		{"HTTP", listen, "PROXY TCP4 203.0.113.7 192.0.2.1 54321 80\r\n", "203.0.113.7|http", false},
		{"HTTPS", tlsAddr, "PROXY TCP4 203.0.113.8 192.0.2.1 54322 443\r\n", "203.0.113.8|https", true},
	} {
		last := ""
		c.WaitFor(tc.name+" through the PROXY protocol", 60*time.Second, func() bool {
			got, err := get(tc.addr, tc.header, tc.tls)
			if now := fmt.Sprintf("%q %v", got, err); now != last {
				t.Logf("%s: %s", tc.name, now)
				last = now
			}
			return err == nil && got == tc.want
		})
	}
	// Without the load balancer's header: not served.
	if got, err := get(listen, "", false); err == nil {
		t.Errorf("HTTP without a PROXY header answered %q, want the connection refused", got)
	}
	if got, err := get(tlsAddr, "", true); err == nil {
		t.Errorf("HTTPS without a PROXY header answered %q, want the connection refused", got)
	}
}
