package routingfragment_test

import (
	"strings"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// clients returns admin clients of the test control plane with the CRDs
// installed by EnsureCRDs.
func clients(t *testing.T) (*testenv.ControlPlane, dynamic.Interface) {
	t.Helper()
	cp := testenv.Get(t)
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	if err := vgwapi.EnsureCRDs(t.Context(), ext); err != nil {
		t.Fatal(err)
	}
	return cp, dynamic.NewForConfigOrDie(cp.Config)
}

func testFragment(gw object.Ref, route string) *routing.Fragment {
	return &routing.Fragment{
		Version: routing.FragmentVersion,
		Gateway: gw,
		Route:   routing.RouteRef{Namespace: "shop", Name: route, CreationTimestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		Parents: []routing.ParentStatus{},
		Listeners: []routing.AttachedListener{
			{Name: "http", Port: 80, Hostnames: []string{"shop.example.com"}},
		},
		Rules: []routing.Rule{{
			Matches:  []ghostjson.Match{{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: "/"}}},
			Backends: []routing.BackendRef{{Namespace: "shop", Name: "web", Port: 80, Weight: 1}},
		}},
	}
}

func TestFragmentRoundTrip(t *testing.T) {
	cp, dyn := clients(t)
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "public"}
	f := testFragment(gw, "shop")
	obj, err := routingfragment.New(f)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := dyn.Resource(vgwapi.RoutingFragments).Namespace(ns).Apply(t.Context(), obj.GetName(), obj,
		metav1.ApplyOptions{FieldManager: vgwapi.FieldManager, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := routingfragment.Read(gw, stored)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := routing.MarshalFragment(f)
	gotJSON, _ := routing.MarshalFragment(got)
	if string(want) != string(gotJSON) {
		t.Errorf("round trip changed the fragment:\n%s\nwant\n%s", gotJSON, want)
	}
	if stored.GetLabels()[gwruntime.GatewayLabel] != "public" {
		t.Errorf("labels %v", stored.GetLabels())
	}

	// The API server refuses a RoutingFragment without the spec's fields.
	bad := obj.DeepCopy()
	bad.SetName("incomplete")
	unstructured.RemoveNestedField(bad.Object, "spec", "gateway")
	if _, err := dyn.Resource(vgwapi.RoutingFragments).Namespace(ns).Create(t.Context(), bad, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "spec.gateway") {
		t.Errorf("creating a fragment without spec.gateway: %v, want an error naming spec.gateway", err)
	}
}

func TestReadFragmentsRejects(t *testing.T) {
	gw := object.Ref{Namespace: "gateways", Name: "public"}
	good := func() *unstructured.Unstructured {
		obj, err := routingfragment.New(testFragment(gw, "shop"))
		if err != nil {
			t.Fatal(err)
		}
		obj.SetResourceVersion("42")
		return obj
	}
	for _, tc := range []struct {
		name   string
		mutate func(*unstructured.Unstructured)
		reason string
	}{
		{"other namespace", func(o *unstructured.Unstructured) { o.SetNamespace("other") }, `namespace "other"`},
		{"other gateway in spec", func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "private", "spec", "gateway")
		}, `spec.gateway is "private"`},
		{"other gateway in fragment", func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "private", "spec", "fragment", "gateway", "name")
		}, "for Gateway gateways/private"},
		{"route differs", func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "shop/other", "spec", "route")
			o.SetName(gwruntime.FragmentName(gw, object.Ref{Namespace: "shop", Name: "other"}))
		}, `spec.route is "shop/other", but spec.fragment is for route shop/shop`},
		{"route not namespace/name", func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "shop", "spec", "route")
		}, `spec.route is "shop", not namespace/name`},
		{"named for another route", func(o *unstructured.Unstructured) {
			o.SetName(gwruntime.FragmentName(gw, object.Ref{Namespace: "shop", Name: "other"}))
		}, "must be named vgw-public-shop-shop-"},
		{"copied under another name", func(o *unstructured.Unstructured) { o.SetName("evil") }, "must be named vgw-public-shop-shop-"},
		{"unknown field", func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "x", "spec", "fragment", "bogus")
		}, `unknown field "bogus"`},
		{"other version", func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, int64(99), "spec", "fragment", "version")
		}, "version is 99"},
		{"invalid value", func(o *unstructured.Unstructured) {
			rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "fragment", "rules")
			rules[0].(map[string]any)["backends"] = []any{map[string]any{"namespace": "shop", "name": "web", "port": int64(0), "weight": int64(1)}}
			_ = unstructured.SetNestedSlice(o.Object, rules, "spec", "fragment", "rules")
		}, "port: Invalid value: 0"},
		{"unknown spec field", func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "x", "spec", "extra")
		}, `unknown field "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, bad := good(), good()
			tc.mutate(bad)
			frags, rejected := routingfragment.ReadAll(gw, []*unstructured.Unstructured{bad, ok})
			if len(frags) != 1 || frags[0].Route.Name != "shop" {
				t.Errorf("the good fragment is not read: %v", frags)
			}
			if len(rejected) != 1 || rejected[0].Name != bad.GetName() || rejected[0].ResourceVersion != "42" ||
				!strings.Contains(rejected[0].Reason, tc.reason) || !strings.Contains(rejected[0].Reason, "terraform apply") {
				t.Errorf("rejected %+v, want %s with a reason containing %q and the fix", rejected, bad.GetName(), tc.reason)
			}
		})
	}
}
