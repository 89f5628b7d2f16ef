package cluster

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/echo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/hitchtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

// httpsHCL is a gateway with an HTTP listener that redirects to HTTPS and
// two HTTPS listeners on port 443, www (Secret www-tls) and api (Secret
// api-tls); %[1]s is the namespace, %[2]s the image, %[3]s the mode.
const httpsHCL = tfcli.KubeconfigProvider + `
resource "varnishgw_gateway_class" "tls" {
  name                 = "tls-%[1]s"
  parameters_namespace = %[1]q
  image                = %[2]q
}

resource "varnishgw_gateway" "tls" {
  namespace             = %[1]q
  name                  = "tls"
  gateway_class_name    = varnishgw_gateway_class.tls.name
  mode                  = %[3]q
  replicas              = 1
  drain_timeout_seconds = 10
  rollout_timeout       = "4m"
  # The test node's kubelet allows it: a hitch reload moves the
  # connections queued on a closing listen socket instead of resetting them.
  sysctls = { "net.ipv4.tcp_migrate_req" = "1" }

  listener {
    name     = "http"
    port     = 80
    protocol = "HTTP"
  }
  listener {
    name     = "www"
    port     = 443
    protocol = "HTTPS"
    hostname = "www.node.test"
    tls {
      certificate_ref {
        name = "www-tls"
      }
    }
  }
  listener {
    name     = "api"
    port     = 443
    protocol = "HTTPS"
    hostname = "api.node.test"
    tls {
      certificate_ref {
        name = "api-tls"
      }
    }
  }
}

resource "varnishgw_http_route" "to_https" {
  namespace = %[1]q
  name      = "to-https"
  hostnames = ["www.node.test"]
  parent_ref {
    name         = varnishgw_gateway.tls.name
    section_name = "http"
  }
  rule {
    filter {
      type = "RequestRedirect"
      request_redirect {
        scheme      = "https"
        status_code = 301
      }
    }
  }
}

resource "varnishgw_http_route" "sites" {
  namespace = %[1]q
  name      = "sites"
  hostnames = ["www.node.test", "api.node.test"]
  parent_ref {
    name         = varnishgw_gateway.tls.name
    section_name = "www"
  }
  parent_ref {
    name         = varnishgw_gateway.tls.name
    section_name = "api"
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`

// TestHTTPSPods: HTTPS listeners on the real node, in both modes. The
// gateway pod of the built image terminates TLS with hitch on port 443 with
// the certificate of a Secret: HTTP/2 by ALPN, the certificate chosen by
// SNI, HTTP redirected to HTTPS, a Host of the other listener answered 421.
// A certificate Secret created after the apply is picked up without a
// re-apply (the listener's ResolvedRefs goes from False to True), and a
// renewed certificate is served without a failed request.
func TestHTTPSPods(t *testing.T) {
	c := newCluster(t)
	c.echo("web", 1)
	for _, mode := range []string{"supervise", "sidecar"} {
		t.Run(mode, func(t *testing.T) {
			parent := c.t
			c.t = t
			defer func() { c.t = parent }()
			testHTTPSPods(t, c, mode)
		})
	}
}

func testHTTPSPods(t *testing.T, c *cluster, mode string) {
	ca := hitchtest.NewCA(t)
	c.tlsSecret("www-tls", ca.Issue(t, "www.node.test"))
	c.deleteSecretAtEnd("api-tls")

	tf := c.terraform()
	tf.write(fmt.Sprintf(httpsHCL, c.ns, c.images.Gateway.Name, mode))
	// api-tls does not exist yet: a warning, and the apply succeeds (the
	// pods are Ready: the listener without a certificate holds no one up).
	if out := tf.mustRun("apply"); !strings.Contains(out, "api-tls") {
		t.Errorf("apply said nothing about the missing Secret api-tls:\n%s", out)
	}
	gw := object.Ref{Namespace: c.ns, Name: "tls"}
	pods := c.gatewayPods(gw)
	if len(pods) != 1 {
		t.Fatalf("%d gateway pods after apply, want 1", len(pods))
	}
	https := net.JoinHostPort(pods[0].Status.PodIP, "443")
	client := hitchtest.Client(t, https, ca.Pool(), true)

	resp, echoed := httpsGet(t, client, "https://www.node.test/", "www.node.test")
	if resp.StatusCode != 200 || !strings.HasPrefix(echoed.Backend, "web-") {
		t.Errorf("https://www.node.test/: %d from %q, want 200 from web-*", resp.StatusCode, echoed.Backend)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("https://www.node.test/ spoke %s, want HTTP/2 (ALPN h2)", resp.Proto)
	}
	if got := echoed.Headers["X-Forwarded-Proto"]; len(got) != 1 || got[0] != "https" {
		t.Errorf("the backend saw X-Forwarded-Proto %q, want https", got)
	}
	// SNI www, Host api: the api listener's Host on the www listener's
	// connection is misdirected.
	req, _ := http.NewRequest("GET", "https://www.node.test/", nil)
	req.Host = "api.node.test"
	if r, err := client.Do(req); err != nil || r.StatusCode != 421 {
		t.Errorf("Host api.node.test with SNI www.node.test: %v %v, want 421", statusOf(r), err)
	} else {
		r.Body.Close()
	}
	a := expect(t, net.JoinHostPort(pods[0].Status.PodIP, "80"), demo.Request{Host: "www.node.test", Path: "/a?b=c"}, 301, "")
	if a.Location != "https://www.node.test/a?b=c" {
		t.Errorf("HTTP redirect Location %q, want https://www.node.test/a?b=c", a.Location)
	}
	c.waitListenerCondition(gw, "www", metav1.ConditionTrue, string(gatewayv1.ListenerReasonResolvedRefs))
	c.waitListenerCondition(gw, "api", metav1.ConditionFalse, string(gatewayv1.ListenerReasonInvalidCertificateRef))

	// The api certificate arrives (cert-manager's way): served without a
	// re-apply.
	c.tlsSecret("api-tls", ca.Issue(t, "api.node.test"))
	c.waitListenerCondition(gw, "api", metav1.ConditionTrue, string(gatewayv1.ListenerReasonResolvedRefs))
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := client.Get("https://api.node.test/")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 && r.TLS != nil && r.TLS.PeerCertificates[0].Subject.CommonName == "api.node.test" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("https://api.node.test/ 30 s after its Secret was created: %v %v", statusOf(r), err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The www certificate is renewed under load (new and keep-alive
	// connections): the new one is served and no request fails.
	r0, _ := httpsGet(t, client, "https://www.node.test/", "www.node.test")
	old := r0.TLS.PeerCertificates[0].SerialNumber
	l := startTLSLoad(t, https, ca.Pool(), "https://www.node.test/")
	c.tlsSecret("www-tls", ca.Issue(t, "www.node.test"))
	fresh := hitchtest.Client(t, https, ca.Pool(), false)
	deadline = time.Now().Add(30 * time.Second)
	for {
		fresh.Transport.(*http.Transport).CloseIdleConnections()
		r, err := fresh.Get("https://www.node.test/")
		if err == nil {
			r.Body.Close()
			if r.TLS.PeerCertificates[0].SerialNumber.Cmp(old) != 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed www certificate is not served 30 s after the Secret changed (%v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	l.end(t)

	// Through the Service too.
	svc := hitchtest.Client(t, c.serviceAddr(gwruntime.Name(gw), 443), ca.Pool(), true)
	if r, _ := httpsGet(t, svc, "https://www.node.test/", "www.node.test"); r.StatusCode != 200 {
		t.Errorf("https://www.node.test/ through the Service: %d, want 200", r.StatusCode)
	}

	tf.mustRun("destroy")
	c.expectNothingLeft(2*time.Minute, "app")
}

func statusOf(r *http.Response) string {
	if r == nil {
		return "no answer"
	}
	return r.Status
}

// httpsGet gets url, checks that the certificate served is for name, and
// returns the answer and what the echo backend saw (zero if another
// answered).
func httpsGet(t *testing.T, client *http.Client, url, name string) (*http.Response, echo.Answer) {
	t.Helper()
	r, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: read the body: %v", url, err)
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].VerifyHostname(name) != nil {
		t.Fatalf("GET %s: the certificate served is not for %s", url, name)
	}
	var a echo.Answer
	if _, js, ok := strings.Cut(string(body), "\n"); ok {
		_ = json.Unmarshal([]byte(js), &a) // not an echo answer: a stays zero
	}
	return r, a
}

// tlsSecret creates or replaces the kubernetes.io/tls Secret name from a
// hitch pem-file (certificate, then key).
func (c *cluster) tlsSecret(name string, pemFile []byte) {
	c.t.Helper()
	cert, rest := pem.Decode(pemFile)
	if cert == nil {
		c.t.Fatalf("no certificate in the pem-file for %s", name)
	}
	if _, err := x509.ParseCertificate(cert.Bytes); err != nil {
		c.t.Fatal(err)
	}
	s := &corev1.Secret{
		// The label keeps it out of expectNothingLeft: the test made it.
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns, Labels: map[string]string{"app": "certificates"}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: pem.EncodeToMemory(cert), corev1.TLSPrivateKeyKey: rest},
	}
	secrets := c.cp.Client.CoreV1().Secrets(c.ns)
	if _, err := secrets.Create(c.ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(c.ctx, s, metav1.UpdateOptions{})
		if err != nil {
			c.t.Fatal(err)
		}
	} else if err != nil {
		c.t.Fatal(err)
	}
}

// deleteSecretAtEnd deletes Secret name now (left by an earlier subtest)
// and when the test ends.
func (c *cluster) deleteSecretAtEnd(name string) {
	del := func() {
		err := c.cp.Client.CoreV1().Secrets(c.ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			c.t.Errorf("delete Secret %s: %v", name, err)
		}
	}
	del()
	c.t.Cleanup(del)
}

// waitListenerCondition waits up to a minute for the listener's
// ResolvedRefs condition to have status and reason.
func (c *cluster) waitListenerCondition(gw object.Ref, listener string, status metav1.ConditionStatus, reason string) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	var got *metav1.Condition
	for {
		g, err := c.cp.Gateway.GatewayV1().Gateways(gw.Namespace).Get(c.ctx, gw.Name, metav1.GetOptions{})
		if err != nil {
			c.t.Fatal(err)
		}
		for _, l := range g.Status.Listeners {
			if string(l.Name) == listener {
				got = meta.FindStatusCondition(l.Conditions, string(gatewayv1.ListenerConditionResolvedRefs))
			}
		}
		if got != nil && got.Status == status && got.Reason == reason {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("listener %s: ResolvedRefs %+v after a minute, want %s/%s", listener, got, status, reason)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// tlsLoad sends requests through two HTTPS clients until ended: one on a
// keep-alive connection, one opening a new connection for every request.
type tlsLoad struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	ok, fail atomic.Int64
	mu       sync.Mutex
	errs     []string
}

func startTLSLoad(t *testing.T, addr string, roots *x509.CertPool, url string) *tlsLoad {
	l := &tlsLoad{stop: make(chan struct{})}
	for _, keepAlive := range []bool{true, false} {
		client := hitchtest.Client(t, addr, roots, false)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				if !keepAlive {
					client.Transport.(*http.Transport).CloseIdleConnections()
				}
				r, err := client.Get(url)
				if err == nil {
					io.Copy(io.Discard, r.Body)
					r.Body.Close()
					if r.StatusCode != 200 {
						err = fmt.Errorf("status %s", r.Status)
					}
				}
				if err != nil {
					l.fail.Add(1)
					l.mu.Lock()
					if len(l.errs) < 5 {
						l.errs = append(l.errs, err.Error())
					}
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
			}
		}()
	}
	return l
}

func (l *tlsLoad) end(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	t.Logf("TLS load during the renewal: %d requests, %d failed", l.ok.Load()+l.fail.Load(), l.fail.Load())
	if l.fail.Load() > 0 || l.ok.Load() < 20 {
		t.Errorf("during the certificate renewal %d of %d requests failed (first errors: %v)", l.fail.Load(), l.ok.Load()+l.fail.Load(), l.errs)
	}
}
