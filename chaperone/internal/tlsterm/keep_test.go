package tlsterm

import (
	"errors"
	"strings"
	"testing"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestKeepOrDrop: after a Secret's certificate was served, a reference
// that fails keeps it served when the problem is its content or transient,
// and withdraws it when the listener may no longer use the Secret
// (deleted, not permitted, forbidden, or not classified by the source); a
// listener left without certificates is Unserved. A second listener on the
// port that may still use the Secret keeps it.
func TestKeepOrDrop(t *testing.T) {
	good := validCert(t, "a.example.com")
	other := validCert(t, "a.example.com")
	expired := newCert(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), "a.example.com")
	ref := SecretRef{Namespace: "edge", Name: "a"}
	failed := func(p Problem, reason gatewayv1.ListenerConditionReason, msg string) Certificate {
		return Certificate{Ref: ref, Err: errors.New(msg), Reason: reason, Problem: p}
	}
	for _, tc := range []struct {
		name string
		c    Certificate
		keep bool
	}{
		{"content: tls.crt not PEM", Certificate{Ref: ref, Cert: []byte("not a certificate"), Key: good.Key}, true},
		{"content: key of another certificate", Certificate{Ref: ref, Cert: other.Cert, Key: good.Key}, true},
		{"content: expired", Certificate{Ref: ref, Cert: expired.Cert, Key: expired.Key}, true},
		{"content: type not kubernetes.io/tls", failed(ProblemContent, "", `type "Opaque": want kubernetes.io/tls`), true},
		{"transient: API server unreachable", failed(ProblemTransient, "", "connection refused"), true},
		{"transient: 503", failed(ProblemTransient, "", "the server is currently unable to handle the request"), true},
		{"transient: list timed out", failed(ProblemTransient, "", "cannot list the Secret within 10s"), true},
		{"revoked: Secret deleted", failed(ProblemRevoked, "", "not found"), false},
		{"revoked: ReferenceGrant deleted", failed(ProblemRevoked, gatewayv1.ListenerReasonRefNotPermitted, "no ReferenceGrant"), false},
		{"revoked: 403 Forbidden", failed(ProblemRevoked, "", `secrets "a" is forbidden`), false},
		{"revoked: not a Secret", failed(ProblemRevoked, "", "certificateRef kind ConfigMap"), false},
		{"unclassified error", Certificate{Ref: ref, Err: errors.New("something")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Err == nil || tc.c.Problem.KeepsLastGood(); got != tc.keep {
				t.Fatalf("%v.KeepsLastGood() = %v, want %v", tc.c.Problem, got, tc.keep)
			}
			m, err := New(Config{Dir: t.TempDir(), HitchBin: "hitch", Ports: []int{443}})
			if err != nil {
				t.Fatal(err)
			}
			first := m.plan([]Listener{{Name: "a", Port: 443, Certificates: []Certificate{{Ref: ref, Cert: good.Cert, Key: good.Key}}}}, time.Now())
			if len(first.certs[443]) != 1 || first.statuses[0].Unserved {
				t.Fatalf("the good certificate is not served: %+v", first)
			}
			p := m.plan([]Listener{{Name: "a", Port: 443, Certificates: []Certificate{tc.c}}}, time.Now())
			st := p.statuses[0]
			if st.Status != "False" {
				t.Errorf("ResolvedRefs %s, want False", st.Status)
			}
			if served := len(p.certs[443]) == 1 && string(p.certs[443][0].PEM) == string(first.certs[443][0].PEM); served != tc.keep {
				t.Errorf("the last good certificate served: %v, want %v (%d certificates)", served, tc.keep, len(p.certs[443]))
			}
			if st.Unserved == tc.keep {
				t.Errorf("Unserved = %v, want %v", st.Unserved, !tc.keep)
			}
			if want := map[bool]string{true: "is served meanwhile", false: "does not serve the Secret's certificate"}[tc.keep]; !strings.Contains(st.Message, want) {
				t.Errorf("message %q, want it to say %q", st.Message, want)
			}
			if tc.keep {
				return
			}
			if len(p.withdrawn) != 1 || m.good[ref] != nil {
				t.Errorf("withdrawn %d certificates, good %v: want the Secret's one withdrawn and forgotten", len(p.withdrawn), m.good[ref])
			}
			// The Secret back: served again.
			if again := m.plan([]Listener{{Name: "a", Port: 443, Certificates: []Certificate{{Ref: ref, Cert: good.Cert, Key: good.Key}}}}, time.Now()); len(again.certs[443]) != 1 || again.statuses[0].Unserved {
				t.Errorf("the Secret back: %+v, want it served", again)
			}
		})
	}

	// Withdrawn for one listener, still permitted for another on the port.
	m, err := New(Config{Dir: t.TempDir(), HitchBin: "hitch", Ports: []int{443}})
	if err != nil {
		t.Fatal(err)
	}
	b := validCert(t, "b.example.com")
	bref := SecretRef{Namespace: "edge", Name: "b"}
	ok := Certificate{Ref: ref, Cert: good.Cert, Key: good.Key}
	both := func(a Certificate) []Listener {
		return []Listener{
			{Name: "a", Port: 443, Certificates: []Certificate{a}},
			{Name: "b", Port: 443, Certificates: []Certificate{{Ref: bref, Cert: b.Cert, Key: b.Key}}},
			{Name: "c", Port: 443, Certificates: []Certificate{ok}},
		}
	}
	m.plan(both(ok), time.Now())
	p := m.plan(both(Certificate{Ref: ref, Err: errors.New("no ReferenceGrant"), Reason: gatewayv1.ListenerReasonRefNotPermitted}), time.Now())
	if len(p.certs[443]) != 2 || string(p.certs[443][0].PEM) != string(m.good[bref].PEM) {
		t.Errorf("port 443 serves %d certificates, want b's (now the default, listener b being the first served) and the one listener c may use", len(p.certs[443]))
	}
	if !p.statuses[0].Unserved || p.statuses[1].Unserved || p.statuses[2].Unserved {
		t.Errorf("Unserved of a, b, c: %v %v %v, want true false false", p.statuses[0].Unserved, p.statuses[1].Unserved, p.statuses[2].Unserved)
	}
	if m.good[ref] == nil {
		t.Error("the certificate listener c may use was forgotten")
	}
}
