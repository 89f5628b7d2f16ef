package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gatewaystatus"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// TestStatusStaysTrue runs the chaperone binary as the Gateway's
// ServiceAccount, with the rights the provider grants (the gateway Role,
// the backend ClusterRole's rules in the backend namespaces, and the route
// status Role of the one route it serves), against the real API server,
// with the Gateway and route status written as the provider writes them:
//   - a route's fragment written or deleted on its own (terraform apply of
//     a route alone) changes the listener's attachedRoutes within seconds,
//     with no write of the Gateway;
//   - deleting the backend Service flips the route's ResolvedRefs to
//     False/BackendNotFound and recreating it flips it back; deleting the
//     ReferenceGrant of its cross-namespace backend flips it to
//     RefNotPermitted; the route's other parent entry (another
//     controller's) is left as it was;
//   - observedGeneration is the route generation the fragment was built
//     from; while the route is at a generation its fragment is not (an
//     apply in progress), the chaperone leaves the status alone;
//   - with its real token the chaperone can read and patch the status of
//     that route only: not another route's, not the route's spec.
func TestStatusStaysTrue(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns, backendNS := cp.Namespace(t), cp.Namespace(t)
	gwRef := object.Ref{Namespace: ns, Name: "edge"}
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(gwRef))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	cp.GrantRole(t, backendNS, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	cp.GrantRole(t, ns, gwruntime.RouteStatusRoleName(gwRef), ns, "chaperone", gwruntime.RouteStatusRules([]string{"app"}))
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, "chaperone")
	must(t, err)
	saCfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	must(t, err)
	frags := fragmentClient(t, cp, ns)
	gws, routes := cp.Gateway.GatewayV1().Gateways(ns), cp.Gateway.GatewayV1().HTTPRoutes(ns)

	listen := varnishdtest.FreeAddr(t)
	gw, err := gws.Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{
			{Name: "http", Port: gatewayv1.PortNumber(varnishdtest.Port(t, listen)), Protocol: gatewayv1.HTTPProtocolType}}},
	}, metav1.CreateOptions{})
	must(t, err)
	// The provider's listener entry, with the count at its creation.
	_, err = gws.ApplyStatus(ctx, gwapply.Gateway("edge", ns).WithStatus(gwapply.GatewayStatus().WithListeners(
		gwapply.ListenerStatus().WithName("http").WithAttachedRoutes(0).
			WithSupportedKinds(gwapply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
			WithConditions(metav1apply.Condition().WithType("Accepted").WithStatus(metav1.ConditionTrue).WithReason("Accepted").
				WithMessage("by the provider").WithObservedGeneration(gw.Generation).WithLastTransitionTime(metav1.Now())))),
		metav1.ApplyOptions{FieldManager: "varnishgw", Force: true})
	must(t, err)

	svc := func(ns, name string) *corev1.Service {
		s, err := cp.Client.CoreV1().Services(ns).Create(ctx, appService(ns, name), metav1.CreateOptions{})
		must(t, err)
		return s
	}
	svc(ns, "app")
	api := svc(backendNS, "api")
	ip, port := hostBackend(t, varnishdtest.HostIP(t), "K")
	_, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "app-1", Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}, metav1.CreateOptions{})
	must(t, err)
	grants := cp.Gateway.GatewayV1().ReferenceGrants(backendNS)
	grantSpec := gatewayv1.ReferenceGrantSpec{
		From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(ns)}},
		To:   []gatewayv1.ReferenceGrantTo{{Kind: "Service"}},
	}
	grant, err := grants.Create(ctx, &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: backendNS, Name: "from-routes"}, Spec: grantSpec}, metav1.CreateOptions{})
	must(t, err)

	// Route app: Service app here, Service api in the backend namespace;
	// a parent entry of another controller's Gateway next to ours.
	port80 := ptr(gatewayv1.PortNumber(80))
	app, err := routes.Create(ctx, &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}, {Name: "theirs"}}},
			Hostnames:       []gatewayv1.Hostname{"app.example.com"},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{
				{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: port80}}},
				{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: "api", Namespace: ptr(gatewayv1.Namespace(backendNS)), Port: port80}}},
			}}},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	objs := &routing.Objects{Services: []*corev1.Service{appService(ns, "app"), api}, ReferenceGrants: []*gatewayv1.ReferenceGrant{grant}}
	// provider writes what the provider writes at a route apply: the
	// fragment, and the route status (Accepted, ResolvedRefs) of ours and
	// the other controller's entry.
	provider := func(route *gatewayv1.HTTPRoute) *routing.Fragment {
		t.Helper()
		f, err := routing.Attach(gw, route, objs)
		must(t, err)
		obj, err := routingfragment.New(f)
		must(t, err)
		if old, err := frags.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
			obj.SetResourceVersion(old.GetResourceVersion())
			_, err = frags.Update(ctx, obj, metav1.UpdateOptions{})
			must(t, err)
		} else {
			_, err = frags.Create(ctx, obj, metav1.CreateOptions{})
			must(t, err)
		}
		ours := f.Parents[0].RouteParentStatus(gwruntime.ControllerName, route.Generation, metav1.Now().Rfc3339Copy())
		theirs := gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: "theirs"}, ControllerName: "example.com/other",
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "theirs",
				ObservedGeneration: 1, LastTransitionTime: metav1.Now().Rfc3339Copy()}}}
		route.Status.Parents = []gatewayv1.RouteParentStatus{ours, theirs}
		_, err = routes.UpdateStatus(ctx, route, metav1.UpdateOptions{FieldManager: "varnishgw"})
		must(t, err)
		return f
	}
	provider(app)

	dir := varnishdtest.Dir(t)
	c := launchChaperone(t, dir, chaperonetest.Backend(t, "file"), listen,
		"--routing=kubernetes", "--gateway="+ns+"/edge", "--kubeconfig="+kubeconfig, "--pod-name=edge-pod-1")
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })

	attached := func(want int32) {
		t.Helper()
		start := time.Now()
		var got int32 = -1
		c.WaitFor(fmt.Sprintf("attachedRoutes=%d", want), 30*time.Second, func() bool {
			g, err := gws.Get(ctx, "edge", metav1.GetOptions{})
			if err != nil || len(g.Status.Listeners) != 1 {
				return false
			}
			got = g.Status.Listeners[0].AttachedRoutes
			return got == want && g.Generation == gw.Generation
		})
		t.Logf("attachedRoutes=%d after %s", want, time.Since(start).Round(time.Millisecond))
	}
	attached(1)

	// Another route applied alone, then destroyed: no Gateway write.
	two := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two", CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}},
			Hostnames: []gatewayv1.Hostname{"two.example.com"}}}
	twoFrag := fragmentObject(t, gw, two)
	_, err = frags.Create(ctx, twoFrag, metav1.CreateOptions{})
	must(t, err)
	attached(2)
	must(t, frags.Delete(ctx, twoFrag.GetName(), metav1.DeleteOptions{}))
	attached(1)

	// ResolvedRefs follows the Service and the ReferenceGrant.
	resolved := func(status metav1.ConditionStatus, reason string, generation int64) {
		t.Helper()
		start := time.Now()
		var last string
		c.WaitFor("ResolvedRefs="+string(status)+"/"+reason, 30*time.Second, func() bool {
			r, err := routes.Get(ctx, "app", metav1.GetOptions{})
			if err != nil || len(r.Status.Parents) != 2 {
				return false
			}
			if p := r.Status.Parents[1]; p.ControllerName != "example.com/other" || len(p.Conditions) != 1 || p.Conditions[0].Message != "theirs" {
				t.Fatalf("the other controller's parent entry changed: %+v", p)
			}
			cond := meta.FindStatusCondition(r.Status.Parents[0].Conditions, "ResolvedRefs")
			if cond == nil {
				return false
			}
			last = fmt.Sprintf("%s/%s (observedGeneration %d): %s", cond.Status, cond.Reason, cond.ObservedGeneration, cond.Message)
			return cond.Status == status && cond.Reason == reason && cond.ObservedGeneration == generation
		})
		t.Logf("ResolvedRefs %s after %s", last, time.Since(start).Round(time.Millisecond))
	}
	resolved(metav1.ConditionTrue, "ResolvedRefs", app.Generation)
	must(t, cp.Client.CoreV1().Services(ns).Delete(ctx, "app", metav1.DeleteOptions{}))
	resolved(metav1.ConditionFalse, "BackendNotFound", app.Generation)
	svc(ns, "app")
	resolved(metav1.ConditionTrue, "ResolvedRefs", app.Generation)
	must(t, grants.Delete(ctx, grant.Name, metav1.DeleteOptions{}))
	resolved(metav1.ConditionFalse, "RefNotPermitted", app.Generation)

	// A new generation of the route whose fragment is not written yet:
	// the chaperone leaves its status to the apply in progress.
	app, err = routes.Get(ctx, "app", metav1.GetOptions{})
	must(t, err)
	app.Spec.Hostnames = append(app.Spec.Hostnames, "www.example.com")
	app, err = routes.Update(ctx, app, metav1.UpdateOptions{})
	must(t, err)
	_, err = grants.Create(ctx, &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: backendNS, Name: "from-routes"}, Spec: grantSpec}, metav1.CreateOptions{})
	must(t, err)
	time.Sleep(3 * time.Second)
	r, err := routes.Get(ctx, "app", metav1.GetOptions{})
	must(t, err)
	if cond := meta.FindStatusCondition(r.Status.Parents[0].Conditions, "ResolvedRefs"); cond.Reason != "RefNotPermitted" || cond.ObservedGeneration != 1 {
		t.Errorf("during an apply of generation %d, ResolvedRefs = %s (observedGeneration %d), want it left at RefNotPermitted (1)", app.Generation, cond.Reason, cond.ObservedGeneration)
	}
	// The apply completes: the provider writes the fragment and status of
	// generation 2 (without the grant it read at plan time); the
	// chaperone sees the grant and sets True for generation 2.
	objs.ReferenceGrants = nil
	provider(app)
	resolved(metav1.ConditionTrue, "ResolvedRefs", app.Generation)

	// An apply that wrote the route's status from older information (a
	// saved plan's view, with the Service still there) is corrected
	// without any other change.
	must(t, cp.Client.CoreV1().Services(ns).Delete(ctx, "app", metav1.DeleteOptions{}))
	resolved(metav1.ConditionFalse, "BackendNotFound", app.Generation)
	app, err = routes.Get(ctx, "app", metav1.GetOptions{})
	must(t, err)
	f, err := routing.Attach(gw, app, &routing.Objects{Services: []*corev1.Service{appService(ns, "app"), api}, ReferenceGrants: []*gatewayv1.ReferenceGrant{grant}})
	must(t, err)
	app.Status.Parents[0] = f.Parents[0].RouteParentStatus(gwruntime.ControllerName, app.Generation, metav1.Now().Rfc3339Copy())
	_, err = routes.UpdateStatus(ctx, app, metav1.UpdateOptions{FieldManager: "varnishgw"})
	must(t, err)
	resolved(metav1.ConditionTrue, "ResolvedRefs", app.Generation)
	resolved(metav1.ConditionFalse, "BackendNotFound", app.Generation)

	// The chaperone's real token: this route's status, nothing else.
	sa := gatewayclient.NewForConfigOrDie(saCfg).GatewayV1().HTTPRoutes(ns)
	_, err = routes.Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}}}}, metav1.CreateOptions{})
	must(t, err)
	patch := []byte(`{"status":{"parents":[]}}`)
	_, err = sa.Get(ctx, "other", metav1.GetOptions{})
	wantForbidden(t, "get another route", err)
	_, err = sa.Patch(ctx, "other", types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	wantForbidden(t, "patch another route's status", err)
	_, err = sa.Patch(ctx, "app", types.MergePatchType, []byte(`{"spec":{"hostnames":["evil.example.com"]}}`), metav1.PatchOptions{})
	wantForbidden(t, "patch the route's spec", err)
	_, err = sa.List(ctx, metav1.ListOptions{})
	wantForbidden(t, "list routes", err)
	_, err = sa.Patch(ctx, "app", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
	must(t, err) // the one right it has

	// The chaperone wrote the Gateway's attachedRoutes and the route's
	// status under its own field manager.
	r, err = routes.Get(ctx, "app", metav1.GetOptions{})
	must(t, err)
	g, err := gws.Get(ctx, "edge", metav1.GetOptions{})
	must(t, err)
	for what, mfs := range map[string][]metav1.ManagedFieldsEntry{"route": r.ManagedFields, "Gateway": g.ManagedFields} {
		if !slices.ContainsFunc(mfs, func(mf metav1.ManagedFieldsEntry) bool {
			return mf.Manager == gatewaystatus.RoutesFieldManager && mf.Subresource == "status"
		}) {
			t.Errorf("the %s's status has no fields of manager %s", what, gatewaystatus.RoutesFieldManager)
		}
	}
}
