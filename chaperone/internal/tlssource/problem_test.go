package tlssource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlsterm"
)

// TestProblemOf: an API error that says the chaperone may not have the
// object withdraws the certificate; one that may pass keeps the last good
// one.
func TestProblemOf(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	for _, tc := range []struct {
		name string
		err  error
		want tlsterm.Problem
	}{
		{"404 NotFound", apierrors.NewNotFound(secrets, "cert"), tlsterm.ProblemRevoked},
		{"403 Forbidden", apierrors.NewForbidden(secrets, "cert", errors.New("RBAC: access denied")), tlsterm.ProblemRevoked},
		{"403 wrapped", fmt.Errorf("list: %w", apierrors.NewForbidden(secrets, "", errors.New("no"))), tlsterm.ProblemRevoked},
		{"401 Unauthorized", apierrors.NewUnauthorized("token expired"), tlsterm.ProblemRevoked},
		{"500", apierrors.NewInternalError(errors.New("etcd")), tlsterm.ProblemTransient},
		{"503", apierrors.NewServiceUnavailable("starting"), tlsterm.ProblemTransient},
		{"504 timeout", apierrors.NewTimeoutError("slow", 1), tlsterm.ProblemTransient},
		{"server timeout", apierrors.NewServerTimeout(secrets, "list", 1), tlsterm.ProblemTransient},
		{"429", apierrors.NewTooManyRequests("busy", 1), tlsterm.ProblemTransient},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, tlsterm.ProblemTransient},
		{"deadline", context.DeadlineExceeded, tlsterm.ProblemTransient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProblemOf(tc.err); got != tc.want {
				t.Errorf("ProblemOf(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if benign(tc.err) {
				t.Errorf("benign(%v) = true", tc.err)
			}
		})
	}
	for _, err := range []error{io.EOF, apierrors.NewResourceExpired("too old resource version")} {
		if !benign(err) {
			t.Errorf("benign(%v) = false, want true: the normal end of a watch", err)
		}
	}
}

// TestResolveProblems: what each failed reference does to the last good
// certificate.
func TestResolveProblems(t *testing.T) {
	certs := gatewayv1.Namespace("certs")
	kind := gatewayv1.Kind("ConfigMap")
	secrets := map[tlsterm.SecretRef]bool{{Namespace: "edge", Name: "opaq"}: true}
	for _, tc := range []struct {
		name string
		ref  gatewayv1.SecretObjectReference
		want tlsterm.Problem
	}{
		{"missing Secret", gatewayv1.SecretObjectReference{Name: "nope"}, tlsterm.ProblemRevoked},
		{"no ReferenceGrant", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, tlsterm.ProblemRevoked},
		{"another kind", gatewayv1.SecretObjectReference{Kind: &kind, Name: "opaq"}, tlsterm.ProblemRevoked},
		{"another type", gatewayv1.SecretObjectReference{Name: "opaq"}, tlsterm.ProblemContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(r tlsterm.SecretRef) *corev1.Secret {
				if !secrets[r] {
					return nil
				}
				s := tlsSecret(r.Namespace, r.Name)
				s.Type = "Opaque"
				return s
			}
			c := Resolve(gateway(tc.ref), lookup, nil)[0].Certificates[0]
			if c.Err == nil || c.Problem != tc.want {
				t.Errorf("error %v problem %v, want %v", c.Err, c.Problem, tc.want)
			}
		})
	}
}

// TestDirProblems: in a routing directory that reads, a Secret removed
// from it withdraws the certificate; while a file does not parse, the
// Secrets it may hold are a transient problem.
func TestDirProblems(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("gateway.yaml", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: demo}
spec:
  gatewayClassName: varnishgw
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    tls: {certificateRefs: [{name: app}]}
`)
	d := NewDir(dir, nil)
	problem := func() (tlsterm.Problem, error) {
		t.Helper()
		s, ok := d.Snapshot()
		if !ok || len(s.Listeners) != 1 || len(s.Listeners[0].Certificates) != 1 {
			t.Fatalf("snapshot %+v, %v", s, ok)
		}
		c := s.Listeners[0].Certificates[0]
		return c.Problem, c.Err
	}
	if p, err := problem(); err == nil || p != tlsterm.ProblemRevoked {
		t.Errorf("no Secret in a directory that reads: %v %v, want revoked", p, err)
	}
	write("certificates.yaml", "kind: Secret\n  : not yaml [")
	if p, err := problem(); err == nil || p != tlsterm.ProblemTransient || !strings.Contains(err.Error(), "the routing directory has an error") {
		t.Errorf("no Secret while a file does not parse: %v %v, want transient, naming the directory's error", p, err)
	}
}
