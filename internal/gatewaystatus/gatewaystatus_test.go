package gatewaystatus

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestForError(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		pending bool
		status  metav1.ConditionStatus
		reason  gatewayv1.GatewayConditionReason
		message string
	}{
		{"loaded", nil, false, metav1.ConditionTrue, gatewayv1.GatewayReasonProgrammed, "ghost loaded the routing of this generation"},
		{"loaded, pending ignored", nil, true, metav1.ConditionTrue, gatewayv1.GatewayReasonProgrammed, "ghost loaded the routing of this generation"},
		{"rejected", errors.New("vhosts[0]: bad"), false, metav1.ConditionFalse, gatewayv1.GatewayReasonInvalid, "vhosts[0]: bad"},
		{"ghost down", errors.New("connection refused"), true, metav1.ConditionFalse, gatewayv1.GatewayReasonPending, "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ForError(7, tc.err, tc.pending)
			want := Programmed{7, tc.status, tc.reason, tc.message}
			if p != want {
				t.Errorf("got %+v, want %+v", p, want)
			}
		})
	}
}

func condition(gw *gatewayv1.Gateway, typ string) *metav1.Condition {
	for i := range gw.Status.Conditions {
		if gw.Status.Conditions[i].Type == typ {
			return &gw.Status.Conditions[i]
		}
	}
	return nil
}

// TestProgrammedPreservesOtherConditions sets Programmed as a real
// ServiceAccount with only get on the Gateway and get/patch on its status,
// and checks that the Accepted condition another field manager owns
// survives, and that the other manager's applies leave Programmed alone.
func TestProgrammedPreservesOtherConditions(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "chaperone"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways"}, ResourceNames: []string{"gw"}, Verbs: []string{"get"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways/status"}, ResourceNames: []string{"gw"}, Verbs: []string{"get", "patch"}},
	}}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "chaperone"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "chaperone"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "chaperone"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	gws := cp.Gateway.GatewayV1().Gateways(ns)
	gw, err := gws.Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The provider owns Accepted.
	accepted := func(msg string) {
		t.Helper()
		_, err := gws.ApplyStatus(ctx, gwapply.Gateway("gw", ns).WithStatus(gwapply.GatewayStatus().WithConditions(
			metav1apply.Condition().WithType("Accepted").WithStatus(metav1.ConditionTrue).WithReason("Accepted").
				WithMessage(msg).WithObservedGeneration(gw.Generation).WithLastTransitionTime(metav1.Now()))),
			metav1.ApplyOptions{FieldManager: "varnishgw-provider", Force: true})
		if err != nil {
			t.Fatal(err)
		}
	}
	accepted("by the provider")

	w := NewWriter(gatewayclient.NewForConfigOrDie(cfg), ns, "gw", nil)
	if err := w.Apply(ctx, ForError(gw.Generation, nil, false)); err != nil {
		t.Fatal(err)
	}
	got, err := gws.Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, a := condition(got, "Programmed"), condition(got, "Accepted")
	if p == nil || p.Status != metav1.ConditionTrue || p.Reason != "Programmed" || p.ObservedGeneration != gw.Generation {
		t.Fatalf("Programmed = %+v", p)
	}
	if a == nil || a.Message != "by the provider" {
		t.Fatalf("Accepted lost or changed: %+v", a)
	}
	firstTransition := p.LastTransitionTime

	// The provider re-applies its condition: Programmed survives.
	accepted("again")
	got, _ = gws.Get(ctx, "gw", metav1.GetOptions{})
	if p := condition(got, "Programmed"); p == nil || p.Status != metav1.ConditionTrue {
		t.Fatalf("Programmed lost after the provider's apply: %+v", got.Status.Conditions)
	}

	// Failure: False/Invalid with ghost's message, through Run and Set.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { w.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	w.now = func() time.Time { return time.Now().Add(time.Hour) }
	w.Set(ForError(gw.Generation, errors.New("ghost rejected ghost.json: vhosts[0].hostname"), false))
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err = gws.Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p := condition(got, "Programmed"); p != nil && p.Status == metav1.ConditionFalse {
			if p.Reason != "Invalid" || p.Message != "ghost rejected ghost.json: vhosts[0].hostname" {
				t.Errorf("Programmed = %+v", p)
			}
			if !p.LastTransitionTime.After(firstTransition.Time) {
				t.Errorf("lastTransitionTime %v not moved on from %v", p.LastTransitionTime, firstTransition)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Programmed not set to False: %+v", got.Status.Conditions)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a := condition(got, "Accepted"); a == nil || a.Message != "again" {
		t.Errorf("Accepted lost or changed: %+v", a)
	}
	// Managed fields: the chaperone owns only its condition.
	for _, mf := range got.ManagedFields {
		if mf.Manager == FieldManager && mf.Subresource != "status" {
			t.Errorf("chaperone manages fields outside status: %+v", mf)
		}
	}
}

// TestRunLogsFailuresOnce: while the condition cannot be set (here the
// Gateway does not exist yet; an API server outage is the same for the
// writer) Run retries with backoff and logs the first failure at WARN only;
// when it works again it logs that once at INFO.
func TestRunLogsFailuresOnce(t *testing.T) {
	cp := testenv.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := cp.Namespace(t)
	var logs syncBuf
	w := NewWriter(cp.Gateway, ns, "late", slog.New(slog.NewJSONHandler(&logs, nil)))
	go w.Run(ctx)
	w.Set(ForError(1, nil, false))
	time.Sleep(4 * time.Second) // 0.5 + 1 + 2 s of backoff: 3 or 4 tries
	if _, err := cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "Programmed condition set again") {
		if time.Now().After(deadline) {
			t.Fatalf("no record of the condition set again:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), `"level":"WARN","msg":"cannot set the Programmed condition`); n != 1 {
		t.Errorf("%d WARN records of the failure, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("ERROR records for a retried failure:\n%s", logs.String())
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
