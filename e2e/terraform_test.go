package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

// classHCL is the head of the e2e tests' configurations: the provider,
// configured from the variable kubeconfig that workspace.run sets, and a
// varnishgw_gateway_class with resource label label, named class, whose
// parameters live in ns and whose image is the one the tests build.
func classHCL(label, ns, class string) string {
	return tfcli.KubeconfigProvider + fmt.Sprintf(`
resource "varnishgw_gateway_class" %[1]q {
  name                 = %[3]q
  parameters_namespace = %[2]q
  image                = "localhost/varnishgw/gateway:test"
}
`, label, ns, class)
}

// workspace is a Terraform working directory in a temporary directory,
// with the provider the tests build, whose runs act as cp's admin.
type workspace struct {
	*tfcli.Workspace
	kubeconfig string
}

func newWorkspace(ctx context.Context, t *testing.T, cp *testenv.ControlPlane) workspace {
	t.Helper()
	tf, err := tfcli.New(ctx, tfcli.Options{Dir: t.TempDir(), ProviderDir: providerDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	return workspace{tf, cp.Kubeconfig}
}

// run runs terraform with args, without color or input, with the variable
// kubeconfig, and with -auto-approve unless args[0] is plan.
func (w workspace) run(ctx context.Context, args ...string) (string, error) {
	args = append(args, "-no-color", "-input=false", "-var", "kubeconfig="+w.kubeconfig)
	if args[0] != "plan" {
		args = append(args, "-auto-approve")
	}
	return w.Run(ctx, args...)
}
