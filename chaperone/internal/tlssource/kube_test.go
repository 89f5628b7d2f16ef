package tlssource

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlsterm"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestKubeLeastPrivilege runs Kube as a ServiceAccount with exactly the
// rights the chaperone's Roles give it for certificates: get/list/watch of
// its Gateway by name, of the referenced Secrets by resourceNames, and of
// ReferenceGrants in the other namespace. A Secret created after the
// Gateway is picked up, a Secret of another namespace resolves once a
// ReferenceGrant permits it, and the ServiceAccount can read no other
// Secret.
func TestKubeLeastPrivilege(t *testing.T) {
	cp := testenv.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, other := cp.Namespace(t), cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone", ns, "chaperone", []rbacv1.PolicyRule{
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways"}, ResourceNames: []string{"gw"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"cert", "late"}, Verbs: []string{"get", "list", "watch"}},
	})
	cp.GrantRole(t, other, "chaperone-certs", ns, "chaperone", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"shared"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"referencegrants"}, Verbs: []string{"get", "list", "watch"}},
	})
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	for _, s := range []*corev1.Secret{tlsSecret(ns, "cert"), tlsSecret(ns, "unrelated"), tlsSecret(other, "shared")} {
		if _, err := cp.Client.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount lists every Secret: %v", err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "unrelated", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount reads an unreferenced Secret: %v", err)
	}
	otherNS := gatewayv1.Namespace(other)
	mode := gatewayv1.TLSModeTerminate
	if _, err := cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
			{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{Mode: &mode,
				CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert"}, {Name: "late"}, {Name: "forbidden"}}}},
			{Name: "shared", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{Mode: &mode,
				CertificateRefs: []gatewayv1.SecretObjectReference{{Namespace: &otherNS, Name: "shared"}}}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	k := &Kube{Client: kube, Gateway: gatewayclient.NewForConfigOrDie(cfg), Namespace: ns, Name: "gw",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	changed := make(chan struct{}, 1)
	go func() {
		if err := k.Run(ctx, func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}); err != nil {
			t.Error(err)
		}
	}()
	// waitState waits until the snapshot's certificates are as want:
	// "ok" or the error's reason, by listener and Secret.
	waitState := func(what string, want map[string]string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		var got map[string]string
		for {
			if s, ok := k.Snapshot(); ok {
				got = map[string]string{}
				for _, l := range s.Listeners {
					for _, c := range l.Certificates {
						v := "ok"
						if c.Err != nil {
							v = string(c.Reason)
						} else if string(c.Cert) != "crt-"+c.Ref.Name {
							v = "wrong data"
						}
						got[l.Name+" "+c.Ref.Name] = v
					}
				}
				if fmt.Sprint(got) == fmt.Sprint(want) {
					return
				}
			}
			select {
			case <-changed:
			case <-time.After(time.Second):
			case <-deadline:
				t.Fatalf("%s: certificates %v, want %v", what, got, want)
			}
		}
	}
	start := time.Now()
	waitState("start", map[string]string{"https cert": "ok", "https late": "InvalidCertificateRef", "https forbidden": "InvalidCertificateRef", "shared shared": "RefNotPermitted"})

	if d := time.Since(start); d < syncGrace-time.Second {
		t.Errorf("the forbidden Secret was given up after %s, before syncGrace (%s)", d, syncGrace)
	}
	s, _ := k.Snapshot()
	for _, c := range s.Listeners[0].Certificates {
		if c.Ref.Name == "forbidden" && (c.Err == nil || !strings.Contains(c.Err.Error(), "needs get, list and watch on secrets with resourceNames [forbidden]")) {
			t.Errorf("the forbidden Secret: %v, want the rights needed", c.Err)
		}
		if c.Ref.Name == "forbidden" && (c.Problem != tlsterm.ProblemRevoked || !strings.Contains(c.Err.Error(), "forbidden")) {
			t.Errorf("the forbidden Secret: problem %v (%v), want revoked, with the API server's answer", c.Problem, c.Err)
		}
	}

	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, tlsSecret(ns, "late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState("the Secret created after the Gateway", map[string]string{"https cert": "ok", "https late": "ok", "https forbidden": "InvalidCertificateRef", "shared shared": "RefNotPermitted"})

	g := grant(other, ns, "Gateway", ptr.To("shared"))
	g.Namespace = other
	if _, err := cp.Gateway.GatewayV1().ReferenceGrants(other).Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState("the ReferenceGrant", map[string]string{"https cert": "ok", "https late": "ok", "https forbidden": "InvalidCertificateRef", "shared shared": "ok"})

	// A Secret's new data reaches the snapshot.
	rotated := tlsSecret(ns, "cert")
	rotated.Data["tls.crt"] = []byte("rotated")
	if _, err := cp.Client.CoreV1().Secrets(ns).Update(ctx, rotated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState("the rotated Secret", map[string]string{"https cert": "wrong data", "https late": "ok", "https forbidden": "InvalidCertificateRef", "shared shared": "ok"})
}
