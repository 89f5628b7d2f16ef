package vgwapi_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
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
