package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// statusRoute is a route named %[2]s to the Service %[2]s.
const statusRoute = `
resource "varnishgw_http_route" %[2]q {
  namespace = %[1]q
  name      = %[2]q
  hostnames = ["%[2]s.status.test"]
  parent_ref {
    name = varnishgw_gateway.day.name
  }
  rule {
    backend_ref {
      name = %[2]q
      port = 80
    }
  }
}
`

// TestStatusFromTerraform: with the real CLI, the real API server and a
// gateway pod's chaperone started with its Deployment's command line as
// the gateway's ServiceAccount (with only the rights the provider
// granted), the status stays true without applies of the gateway:
//   - a route applied on its own gets its ResolvedRefs from the pod, not
//     from the provider, before the apply returns;
//   - a route applied on its own raises the listener's attachedRoutes
//     within seconds, and destroying it lowers it, while the Gateway's
//     spec is untouched;
//   - deleting a route's backend Service turns its ResolvedRefs to
//     False/BackendNotFound and creating it again back to True, written by
//     the gateway pod under its own field manager, at the route's
//     generation.
func TestStatusFromTerraform(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "day"}
	ip, err := varnishdtest.FindHostIP()
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]*demo.Backend{}
	for _, name := range []string{"www", "api"} {
		b, err := demo.StartBackend(name+"-1", ip)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		backends[name] = b
		if err := demo.RegisterService(ctx, cp.Client, ns, name, 80, b); err != nil {
			t.Fatal(err)
		}
	}
	dir := varnishdtest.Dir(t)
	port := varnishdtest.Port(t, varnishdtest.FreeAddr(t))
	tf := newWorkspace(ctx, t, cp)
	class := "status-" + ns
	apply := func(routes ...string) {
		t.Helper()
		var hcl string
		for _, r := range routes {
			hcl += fmt.Sprintf(statusRoute, ns, r)
		}
		if err := tf.WriteFile("main.tf", classHCL("day", ns, class)+fmt.Sprintf(dayHCL, ns, port, hcl)); err != nil {
			t.Fatal(err)
		}
		if out, err := tf.run(ctx, "apply"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	t.Cleanup(func() {
		_, _ = tf.run(context.Background(), "destroy")
	})
	apply("www")

	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, gwruntime.Name(gw))
	if err != nil {
		t.Fatal(err)
	}
	vmodDir := varnishdtest.Dir(t)
	if _, err := varnishdtest.BuildGhost(vmodDir); err != nil {
		t.Fatal(err)
	}
	// The Pod object a kubelet would mark Ready, so that the provider
	// counts the pod: it waits for it, and leaves the ResolvedRefs of the
	// routes it serves to it.
	readyPod(t, cp, gw, "day-0")
	ch := startChaperone(ctx, t, cp, demo.ChaperoneOptions{
		Gateway: gw, Kubeconfig: kubeconfig, PodName: "day-0", Dir: dir, VMODDir: vmodDir, ListenHost: "127.0.0.1",
	})
	if err := ch.Ready(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}

	gws := cp.Gateway.GatewayV1().Gateways(ns)
	start, err := gws.Get(ctx, "day", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, timeout time.Duration, ok func() (bool, string)) {
		t.Helper()
		began := time.Now()
		var last string
		for {
			var done bool
			done, last = ok()
			if done {
				t.Logf("%s after %s", what, time.Since(began).Round(time.Millisecond))
				return
			}
			if time.Since(began) > timeout {
				t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Within 10 s of the apply's end (the fragment is written during it).
	attached := func(want int32) {
		t.Helper()
		waitFor(fmt.Sprintf("attachedRoutes=%d", want), 10*time.Second, func() (bool, string) {
			g, err := gws.Get(ctx, "day", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if g.Generation != start.Generation {
				t.Fatalf("the Gateway's spec changed: generation %d, was %d", g.Generation, start.Generation)
			}
			if len(g.Status.Listeners) != 1 {
				return false, fmt.Sprintf("%+v", g.Status.Listeners)
			}
			return g.Status.Listeners[0].AttachedRoutes == want, fmt.Sprint(g.Status.Listeners[0].AttachedRoutes)
		})
	}
	attached(1)
	applied := time.Now()
	apply("www", "api")
	t.Logf("terraform apply of the api route took %s", time.Since(applied).Round(time.Millisecond))
	// One writer: the provider wrote the new route's entry and Accepted,
	// the pod its ResolvedRefs, and the apply returned once it had. The
	// pod's write was the last, so its field manager owns status.parents.
	r, err := cp.Gateway.GatewayV1().HTTPRoutes(ns).Get(ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Status.Parents) != 1 {
		t.Fatalf("api route status parents: %+v", r.Status.Parents)
	}
	if c := meta.FindStatusCondition(r.Status.Parents[0].Conditions, "ResolvedRefs"); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != r.Generation {
		t.Errorf("when the apply returned, the api route's ResolvedRefs was %+v; want True for generation %d", c, r.Generation)
	}
	if owner := statusParentsOwner(r); owner != gwruntime.RoutesFieldManager {
		t.Errorf("status.parents of the new route was last written by %q, want the pods' %q (the provider must leave ResolvedRefs to them)", owner, gwruntime.RoutesFieldManager)
	}
	attached(2)

	resolved := func(route, status, reason string) {
		t.Helper()
		waitFor(route+" ResolvedRefs="+status+"/"+reason, 10*time.Second, func() (bool, string) {
			r, err := cp.Gateway.GatewayV1().HTTPRoutes(ns).Get(ctx, route, metav1.GetOptions{})
			if err != nil || len(r.Status.Parents) != 1 {
				return false, fmt.Sprint(err)
			}
			c := meta.FindStatusCondition(r.Status.Parents[0].Conditions, "ResolvedRefs")
			if c == nil {
				return false, "no condition"
			}
			return string(c.Status) == status && c.Reason == reason && c.ObservedGeneration == r.Generation,
				fmt.Sprintf("%s/%s at %d: %s", c.Status, c.Reason, c.ObservedGeneration, c.Message)
		})
	}
	resolved("api", "True", "ResolvedRefs")
	if err := cp.Client.CoreV1().Services(ns).Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	resolved("api", "False", "BackendNotFound")
	r, err = cp.Gateway.GatewayV1().HTTPRoutes(ns).Get(ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(r.ManagedFields, func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager == gwruntime.RoutesFieldManager && mf.Subresource == "status"
	}) {
		t.Errorf("the route's status was not written by the gateway pod's field manager %s", gwruntime.RoutesFieldManager)
	}
	if err := demo.RegisterService(ctx, cp.Client, ns, "api", 80, backends["api"]); err != nil {
		t.Fatal(err)
	}
	resolved("api", "True", "ResolvedRefs")

	apply("www")
	attached(1)
}

// statusParentsOwner is the field manager that owns the route's
// status.parents (an atomic list: the last writer owns all of it), "" when
// none does.
func statusParentsOwner(r *gatewayv1.HTTPRoute) string {
	for _, mf := range r.ManagedFields {
		if mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Status map[string]json.RawMessage `json:"f:status"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) == nil {
			if _, ok := fields.Status["f:parents"]; ok {
				return mf.Manager
			}
		}
	}
	return ""
}
