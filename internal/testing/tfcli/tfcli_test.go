package tfcli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func newWorkspace(t *testing.T, env ...string) *Workspace {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the provider and runs the terraform/tofu CLI; skipped with -short")
	}
	ws, err := New(t.Context(), Options{Dir: t.TempDir(), Env: env, Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CLI: %s", ws.CLI)
	return ws
}

func TestFindCLIOrder(t *testing.T) {
	dir := t.TempDir()
	fake := func(name, banner string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+banner+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tf := fake("terraform", "Terraform v1.11.4")
	tofu := fake("tofu", "OpenTofu v1.10.10")
	for _, tc := range []struct {
		name     string
		env      map[string]string
		wantPath string
		wantTofu bool
	}{
		{"TF_ACC_TERRAFORM_PATH first", map[string]string{"TF_ACC_TERRAFORM_PATH": tofu, "VARNISHGW_TERRAFORM": tf}, tofu, true},
		{"then VARNISHGW_TERRAFORM", map[string]string{"VARNISHGW_TERRAFORM": tf, "VARNISHGW_TOFU_PATH": tofu}, tf, false},
		{"then VARNISHGW_TOFU_PATH", map[string]string{"VARNISHGW_TOFU_PATH": tofu}, tofu, true},
		{"then PATH", map[string]string{"PATH": dir}, tf, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"TF_ACC_TERRAFORM_PATH", "VARNISHGW_TERRAFORM", "VARNISHGW_TOFU_PATH"} {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cli, err := FindCLI(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if cli.Path != tc.wantPath || cli.Tofu != tc.wantTofu {
				t.Errorf("FindCLI = %+v, want path %s tofu %v", cli, tc.wantPath, tc.wantTofu)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		for _, k := range []string{"TF_ACC_TERRAFORM_PATH", "VARNISHGW_TERRAFORM", "VARNISHGW_TOFU_PATH"} {
			t.Setenv(k, "")
		}
		t.Setenv("PATH", t.TempDir())
		if _, err := FindCLI(t.Context()); err == nil || !strings.Contains(err.Error(), "TF_ACC_TERRAFORM_PATH") {
			t.Errorf("FindCLI without a CLI = %v, want an error naming TF_ACC_TERRAFORM_PATH", err)
		}
	})
}

// The CLI runs the provider built from this repository: without a cluster
// the plan fails with the provider's own error, through ExitError.
func TestPlanRunsTheBuiltProvider(t *testing.T) {
	for _, env := range []string{"KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_HOST"} {
		t.Setenv(env, "")
	}
	ws := newWorkspace(t)
	if err := ws.WriteFile("main.tf", RequiredProviders+`
provider "varnishgw" {}
resource "varnishgw_gateway_class" "c" {
  name  = "never"
  image = "localhost/varnishgw/gateway:test"
}
`); err != nil {
		t.Fatal(err)
	}
	changed, err := ws.Plan(t.Context())
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 1 {
		t.Fatalf("Plan = %v, %v; want an ExitError with status 1", changed, err)
	}
	if !strings.Contains(exit.Stderr, "no Kubernetes cluster is configured") {
		t.Errorf("plan stderr does not carry the provider's error:\n%s", exit.Stderr)
	}
}

// Apply, a no-change Plan, Output and Destroy against the test control
// plane, with the connection in KUBE_CONFIG_PATH.
func TestApplyPlanDestroy(t *testing.T) {
	cp := testenv.Get(t)
	ws := newWorkspace(t, "KUBE_CONFIG_PATH="+cp.Kubeconfig)
	ctx := context.Background()
	class := "tfcli-" + rand.String(6)
	if err := ws.WriteFile("main.tf", RequiredProviders+fmt.Sprintf(`
provider "varnishgw" {}
resource "varnishgw_gateway_class" "c" {
  name  = %q
  image = "localhost/varnishgw/gateway:test"
}
output "name" { value = varnishgw_gateway_class.c.name }
`, class)); err != nil {
		t.Fatal(err)
	}
	if changed, err := ws.Plan(ctx); err != nil || !changed {
		t.Fatalf("first Plan = %v, %v; want changes", changed, err)
	}
	if err := ws.Apply(ctx, "-parallelism=2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Gateway.GatewayV1().GatewayClasses().Delete(ctx, class, metav1.DeleteOptions{}) })
	if _, err := cp.Gateway.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{}); err != nil {
		t.Fatalf("GatewayClass after apply: %v", err)
	}
	var name string
	if err := ws.Output(ctx, "name", &name); err != nil || name != class {
		t.Errorf("Output(name) = %q, %v; want %q", name, err, class)
	}
	if changed, err := ws.Plan(ctx); err != nil || changed {
		t.Errorf("Plan after apply = %v, %v; want no changes", changed, err)
	}
	if err := ws.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Gateway.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("GatewayClass after destroy: %v, want NotFound", err)
	}
}
