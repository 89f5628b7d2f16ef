package vgwapi_test

import (
	"context"
	"strconv"
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

func TestEnsureCRDs(t *testing.T) {
	cp := testenv.Get(t)
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	ctx := t.Context()
	for range 2 { // installs, then finds them installed
		if err := vgwapi.EnsureCRDs(ctx, ext); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range vgwapi.CRDs() {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Annotations[vgwapi.CRDRevisionAnnotation] != strconv.Itoa(vgwapi.CRDRevision) {
			t.Errorf("%s: revision annotation %q", c.Name, got.Annotations[vgwapi.CRDRevisionAnnotation])
		}
	}

	// A CRD of a later revision (a newer provider's) is left alone.
	name := vgwapi.CRDs()[0].Name
	got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	later := strconv.Itoa(vgwapi.CRDRevision + 1)
	got.Annotations[vgwapi.CRDRevisionAnnotation] = later
	got.Spec.Versions[0].AdditionalPrinterColumns = nil
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := vgwapi.EnsureCRDs(ctx, ext); err != nil {
		t.Fatal(err)
	}
	got, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[vgwapi.CRDRevisionAnnotation] != later || len(got.Spec.Versions[0].AdditionalPrinterColumns) != 0 {
		t.Errorf("EnsureCRDs replaced a CRD of a later revision: %v", got.Annotations)
	}
	// Back to this revision for the other tests.
	got.Annotations[vgwapi.CRDRevisionAnnotation] = "0"
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := vgwapi.EnsureCRDs(ctx, ext); err != nil {
		t.Fatal(err)
	}
}

func TestFragmentRoundTrip(t *testing.T) {
	cp, dyn := clients(t)
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "public"}
	f := testFragment(gw, "shop")
	obj, err := vgwapi.NewFragment(f)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := dyn.Resource(vgwapi.RoutingFragments).Namespace(ns).Apply(t.Context(), obj.GetName(), obj,
		metav1.ApplyOptions{FieldManager: vgwapi.FieldManager, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := vgwapi.ReadFragment(gw, stored)
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
		obj, err := vgwapi.NewFragment(testFragment(gw, "shop"))
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
		}, `spec.route is "shop/other"`},
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
			frags, rejected := vgwapi.ReadFragments(gw, []*unstructured.Unstructured{bad, ok})
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

func TestReports(t *testing.T) {
	cp, dyn := clients(t)
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "public"}
	ctx := t.Context()
	r := vgwapi.NewReporter(dyn, gw, vgwapi.Pod{Name: "public-abc"}, nil)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.Run(runCtx)
	r.SetRouting(vgwapi.RoutingReport{
		FragmentsResourceVersion: "1000", GatewayGeneration: 3, Fragments: 2,
		Rejected: []vgwapi.Rejection{{Name: "vgw-bad", ResourceVersion: "990", Reason: "corrupt"}},
		Time:     metav1.Now(),
	})
	var reports map[string]*vgwapi.GatewayPodReport
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if reports, err = vgwapi.ReadReports(ctx, dyn, gw); err != nil {
			t.Fatal(err)
		}
		if len(reports) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rep := reports["public-abc"]
	if rep == nil || rep.Status.Routing == nil || rep.Status.Routing.GatewayGeneration != 3 {
		t.Fatalf("reports %+v", reports)
	}
	for _, tc := range []struct {
		name, rv string
		served   bool
		rejected bool
	}{
		{"vgw-a", "999", true, false},
		{"vgw-a", "1000", true, false},
		{"vgw-a", "1001", false, false},
		{"vgw-a", "10000", false, false},
		{"vgw-bad", "990", true, true},
		{"vgw-bad", "995", true, false},
		{"vgw-a", "not-a-version", false, false},
	} {
		served, rej := rep.Served(tc.name, tc.rv)
		if served != tc.served || (rej != nil) != tc.rejected {
			t.Errorf("Served(%s, %s) = %v, %v; want %v, rejected %v", tc.name, tc.rv, served, rej, tc.served, tc.rejected)
		}
	}
}
