package routingsync

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/dnswatch"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/dnstest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// TestKubeSourceExternalNames: with ExternalNames the source follows the
// DNS names of the ExternalName Services the fragments reference, hands
// their addresses to the routing core, calls changed when they move, and
// forgets a name no fragment references any more.
func TestKubeSourceExternalNames(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "gw"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	dns := dnstest.Start(t)
	dns.SetAddrs("api.ext.test", 1, "192.0.2.1")
	// The answers are documentation addresses, which a test machine may
	// have (one has 192.0.2.2 on eth0): no own addresses to refuse
	// (dnswatch tests that refusal).
	noOwn := func() ([]netip.Addr, error) { return nil, nil }
	w, err := dnswatch.New(dnswatch.Config{Servers: []string{dns.Addr()}, MinTTL: 200 * time.Millisecond, OwnAddrs: noOwn, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ext := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "api.ext.test."},
	}
	gw, err := cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, testGateway(ns), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, func() error {
		_, err := cp.Client.CoreV1().Services(ns).Create(ctx, ext, metav1.CreateOptions{})
		return err
	})
	frags := fragments(t, cp, ns)
	frag := putFragment(t, frags, fragmentObject(t, gw, testRoute(ns, "r", "ext.example.com", ns, "ext"),
		&routing.Objects{Services: []*corev1.Service{ext}, ExternalNameServices: true}))

	src, err := NewKubeSource(KubeConfig{
		Client: kubernetes.NewForConfigOrDie(cfg), Gateway: gatewayclient.NewForConfigOrDie(cfg), Dynamic: dynamic.NewForConfigOrDie(cfg),
		Namespace: ns, Name: "gw", Logger: testLogger(t), ExternalNames: w,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	changes := make(chan struct{}, 100)
	go func() {
		done <- src.Run(rctx, func() {
			select {
			case changes <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("KubeSource.Run: %v", err)
		}
	})

	names := func(want string) {
		t.Helper()
		eventually(t, 30*time.Second, "ExternalNames "+want, func() error {
			st, err := src.State()
			if errors.Is(err, ErrNotSynced) {
				return err
			}
			if err != nil {
				t.Fatal(err)
			}
			if !st.Objects.ExternalNameServices {
				t.Fatal("Objects.ExternalNameServices is not set")
			}
			if got := fmt.Sprint(st.Objects.ExternalNames); got != want {
				return fmt.Errorf("ExternalNames = %s", got)
			}
			return nil
		})
	}
	names("map[api.ext.test:[192.0.2.1]]")
	for len(changes) > 0 {
		<-changes
	}
	dns.SetAddrs("api.ext.test", 1, "192.0.2.2")
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("no change reported after the name's addresses moved")
	}
	names("map[api.ext.test:[192.0.2.2]]")

	// The route goes: the name is forgotten.
	if err := frags.Delete(ctx, frag.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	names("map[]")
	if got := w.Addrs(); len(got) != 0 {
		t.Errorf("the watcher still follows %v", got)
	}
}
