package provider

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// mergedRoutingOf reads and merges the fragments of Gateway ns/gw as the
// chaperone does.
func mergedRoutingOf(t *testing.T, cp *testenv.ControlPlane, ns, gw string) ([]*routing.Fragment, *routing.Table) {
	t.Helper()
	ctx := context.Background()
	ref := object.Ref{Namespace: ns, Name: gw}
	list, err := dynamic.NewForConfigOrDie(cp.Config).Resource(vgwapi.RoutingFragments).Namespace(ns).
		List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(gwruntime.GatewayLabels(ref)).String()})
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	frags, rejected := routingfragment.ReadAll(ref, objs)
	if len(rejected) > 0 {
		t.Fatalf("rejected fragments: %+v", rejected)
	}
	g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, gw, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	table, err := routing.Merge(g, frags)
	if err != nil {
		t.Fatal(err)
	}
	return frags, table
}

// Twenty routes on one Gateway applied by the real CLI with
// -parallelism=10 all end up in the Gateway's routing, and a second plan is
// empty.
func TestAccParallelApply(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	ctx := context.Background()
	const n = 20

	ws, err := tfcli.New(ctx, tfcli.Options{Dir: t.TempDir(), Env: []string{"KUBE_CONFIG_PATH=" + cp.Kubeconfig}, Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CLI: %s", ws.CLI)
	if err := ws.WriteFile("main.tf", tfcli.RequiredProviders+fmt.Sprintf(`
provider "varnishgw" {}

resource "varnishgw_http_route" "r" {
  count     = %d
  namespace = %q
  name      = "r${count.index}"
  hostnames = ["r${count.index}.example.com"]
  parent_ref {
    name = %q
  }
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/"
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, n, ns, gw)); err != nil {
		t.Fatal(err)
	}
	if err := ws.Apply(ctx, "-parallelism=10"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ws.Destroy(context.Background(), "-parallelism=10"); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})

	frags, table := mergedRoutingOf(t, cp, ns, gw)
	if len(frags) != n {
		t.Errorf("%d RoutingFragments, want %d", len(frags), n)
	}
	routes := map[string]bool{}
	for _, v := range table.VHosts {
		for i := range v.Routes {
			routes[v.Routes[i].Route.String()] = true
		}
	}
	for i := range n {
		if r := fmt.Sprintf("%s/r%d", ns, i); !routes[r] {
			t.Errorf("route %s is not in the merged routing", r)
		}
	}
	if len(routes) != n || len(table.Conflicts) != 0 {
		t.Errorf("merged routing has %d routes and conflicts %v, want %d routes and none", len(routes), table.Conflicts, n)
	}
	if changed, err := ws.Plan(ctx, "-parallelism=10"); err != nil || changed {
		t.Errorf("second plan: changes %v, err %v; want an empty plan", changed, err)
	}
}
