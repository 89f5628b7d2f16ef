package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/toolsenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// TestAccCacheInvalidateAction runs the varnishgw_cache_invalidate action
// with the Terraform 1.14 CLI (VARNISHGW_TERRAFORM_NEW=1 make setup builds
// it; the test is skipped without it): invoked with terraform apply
// -invoke, and from a terraform_data resource's action_trigger, both pods
// apply the invalidation before the apply returns, and the
// CacheInvalidation is deleted afterwards; an invalid regex fails the
// plan naming the block.
func TestAccCacheInvalidateAction(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 (make test and make testacc do)")
	}
	if _, err := toolsenv.Load(); err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("VARNISHGW_TERRAFORM_NEW_PATH")
	if bin == "" {
		t.Skip("needs Terraform 1.14 for actions: run VARNISHGW_TERRAFORM_NEW=1 make setup (VARNISHGW_TERRAFORM_NEW_PATH is empty)")
	}
	cp := accPreCheck(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	gwRef := object.Ref{Namespace: ns, Name: gw}
	pods := []*invalidationPod{
		startInvalidationPod(t, cp, gwRef, gw+"-a", true),
		startInvalidationPod(t, cp, gwRef, gw+"-b", true),
	}
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	ws, err := tfcli.New(ctx, tfcli.Options{Dir: t.TempDir(), CLI: &tfcli.CLI{Path: bin}, Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	action := func(regex string) string {
		return tfcli.RequiredProviders + providerBlock(cp) + fmt.Sprintf(`
action "varnishgw_cache_invalidate" "assets" {
  config {
    gateway_namespace = %q
    gateway_name      = %q
    ban {
      host       = "www.example.com"
      path_regex = %q
    }
    tags = ["release"]
  }
}
`, ns, gw, regex)
	}
	wantBans := [][]string{
		{"obj.http.X-Ghost-Host", "==", "www.example.com", "&&", "obj.http.X-Ghost-Path", "~", `^/assets/.*\.css$`},
		{"obj.http.X-Ghost-Tags", "~", `(^|\x20)release(\x20|$)`},
	}
	check := func(times int) {
		t.Helper()
		for _, p := range pods {
			var want [][]string
			for range times {
				want = append(want, wantBans...)
			}
			if got := p.banned(); !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("pod %s banned %q, want %q", p.name, got, want)
			}
		}
		list, err := dyn.Resource(vgwapi.CacheInvalidations).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			t.Errorf("%d CacheInvalidations left (%v), want the applied one deleted", len(list.Items), err)
		}
	}

	must(t, ws.WriteFile("main.tf", action(`^/assets/.*\.css$`)))
	out, err := ws.Run(ctx, "apply", "-auto-approve", "-input=false", "-no-color", "-invoke=action.varnishgw_cache_invalidate.assets")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "applied by 2 gateway pod(s): "+gw+"-a, "+gw+"-b") {
		t.Errorf("apply -invoke output does not name the pods that applied it:\n%s", out)
	}
	check(1)

	// From an action_trigger: after terraform_data is created.
	must(t, ws.WriteFile("main.tf", action(`^/assets/.*\.css$`)+`
resource "terraform_data" "release" {
  input = "1"
  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [action.varnishgw_cache_invalidate.assets]
    }
  }
}
`))
	must(t, ws.Apply(ctx))
	check(2)

	must(t, ws.WriteFile("main.tf", action(`^/(a)\1`)))
	_, err = ws.Run(ctx, "apply", "-auto-approve", "-input=false", "-no-color", "-invoke=action.varnishgw_cache_invalidate.assets")
	var exit *tfcli.ExitError
	if !errors.As(err, &exit) || !strings.Contains(exit.Stderr, "ban[0].path_regex") || !strings.Contains(exit.Stderr, "backreference") {
		t.Errorf("an invalid regex: %v, want an error naming ban[0].path_regex", err)
	}
	check(2)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
