package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"golang.org/x/mod/modfile"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestGatewayAPIVersionMatchesGoMod(t *testing.T) {
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range mod.Require {
		if req.Mod.Path == "sigs.k8s.io/gateway-api" {
			if req.Mod.Version != GatewayAPIVersion {
				t.Errorf("GatewayAPIVersion = %s, go.mod has %s: update the constant", GatewayAPIVersion, req.Mod.Version)
			}
			return
		}
	}
	t.Fatal("sigs.k8s.io/gateway-api is not required in go.mod")
}

func TestConnectionRequiresACluster(t *testing.T) {
	for _, env := range []string{"KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_HOST", "KUBE_CTX", "KUBE_TOKEN", "KUBE_INSECURE"} {
		t.Setenv(env, "")
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		model   connectionModel
		env     map[string]string
		wantErr string
	}{
		{"nothing configured", connectionModel{}, nil, "no Kubernetes cluster is configured"},
		{"missing kubeconfig", connectionModel{ConfigPath: types.StringValue(filepath.Join(dir, "nope"))}, nil, `kubeconfig ".*nope" \(config_path/config_paths\)`},
		{"bad KUBE_INSECURE", connectionModel{Host: types.StringValue("https://10.0.0.1:6443")}, map[string]string{"KUBE_INSECURE": "maybe"}, `KUBE_INSECURE="maybe" is not a boolean`},
		{"exec without command", connectionModel{Host: types.StringValue("https://10.0.0.1:6443"), Exec: execBlock(&execModel{APIVersion: types.StringValue("client.authentication.k8s.io/v1")})}, nil, "exec: command and api_version are both required"},
		{"host from the environment", connectionModel{Exec: execBlock(nil)}, map[string]string{"KUBE_HOST": "https://10.0.0.1:6443", "KUBE_TOKEN": "t"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := tc.model.restConfig()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("restConfig: %v", err)
				}
				if cfg.Host != "https://10.0.0.1:6443" || cfg.BearerToken != "t" {
					t.Errorf("restConfig = host %q token %q, want them from KUBE_HOST and KUBE_TOKEN", cfg.Host, cfg.BearerToken)
				}
				return
			}
			if err == nil || !regexp.MustCompile(tc.wantErr).MatchString(err.Error()) {
				t.Errorf("restConfig error = %v, want it to match %q", err, tc.wantErr)
			}
		})
	}
}

// TestConnectionUnknown: a setting known only after apply, or an element of
// one, makes the configuration unknown (the resources then report that the
// client is not configured yet); known lists and maps configure the exec
// plugin.
func TestConnectionUnknown(t *testing.T) {
	known := types.ListValueMust(types.StringType, []attr.Value{types.StringValue("token")})
	withUnknown := types.ListValueMust(types.StringType, []attr.Value{types.StringValue("token"), types.StringUnknown()})
	for _, tc := range []struct {
		name string
		m    connectionModel
		want bool
	}{
		{"nothing", connectionModel{Exec: execBlock(nil)}, false},
		{"known exec", connectionModel{Exec: execBlock(&execModel{Command: types.StringValue("c"), Args: known})}, false},
		{"unknown exec argument", connectionModel{Exec: execBlock(&execModel{Command: types.StringValue("c"), Args: withUnknown})}, true},
		{"unknown exec args", connectionModel{Exec: execBlock(&execModel{Command: types.StringValue("c"), Args: types.ListUnknown(types.StringType)})}, true},
		{"unknown exec env value", connectionModel{Exec: execBlock(&execModel{Command: types.StringValue("c"),
			Env: types.MapValueMust(types.StringType, map[string]attr.Value{"CLUSTER": types.StringUnknown()})})}, true},
		{"unknown exec block", connectionModel{Exec: types.ObjectUnknown(execAttrTypes)}, true},
		{"unknown config path", connectionModel{ConfigPaths: withUnknown, Exec: execBlock(nil)}, true},
		{"unknown host", connectionModel{Host: types.StringUnknown(), Exec: execBlock(nil)}, true},
	} {
		if got := tc.m.hasUnknown(); got != tc.want {
			t.Errorf("%s: hasUnknown = %v, want %v", tc.name, got, tc.want)
		}
	}
	cfg, err := connectionModel{Host: types.StringValue("https://10.0.0.1:6443"), Exec: execBlock(&execModel{
		APIVersion: types.StringValue("client.authentication.k8s.io/v1"), Command: types.StringValue("aws"),
		Args: types.ListValueMust(types.StringType, []attr.Value{types.StringValue("eks"), types.StringValue("get-token")}),
		Env:  types.MapValueMust(types.StringType, map[string]attr.Value{"B": types.StringValue("2"), "A": types.StringValue("1")}),
	})}.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg.ExecProvider; e == nil || e.Command != "aws" || fmt.Sprint(e.Args) != "[eks get-token]" || fmt.Sprint(e.Env) != "[{A 1} {B 2}]" {
		t.Errorf("exec provider = %+v", cfg.ExecProvider)
	}
}

// TestAccProviderUnknownExecArgs: an exec argument known only after apply
// (here a terraform_data output, usually a cluster's name) does not fail
// the plan; what needs the cluster at plan time (a data source) says the
// client is not configured yet and what to do.
func TestAccProviderUnknownExecArgs(t *testing.T) {
	accPreCheck(t)
	config := func(extra string) string {
		return `
resource "terraform_data" "cluster" {
  input = "production"
}

provider "varnishgw" {
  host = "https://192.0.2.1:6443"
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = "print-token"
    args        = ["--cluster", terraform_data.cluster.output]
    env         = { CLUSTER = terraform_data.cluster.output }
  }
}

resource "varnishgw_gateway_class" "c" {
  name  = "unknown-exec"
  image = "` + testImage + `"
}
` + extra
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config(""), PlanOnly: true, ExpectNonEmptyPlan: true},
			{
				Config: config(`
data "varnishgw_gateway" "g" {
  namespace = "default"
  name      = "edge"
}
`),
				PlanOnly:    true,
				ExpectError: words(`The provider has no Kubernetes client: its configuration was not known when this operation ran`),
			},
		},
	})
}

func TestAccProviderConfiguration(t *testing.T) {
	cp := accPreCheck(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// A kubeconfig context that does not exist is an error, not a fallback.
				Config: fmt.Sprintf("provider \"varnishgw\" {\n  config_path = %q\n  config_context = \"nope\"\n}\n", cp.Kubeconfig) +
					`resource "varnishgw_gateway_class" "c" {
  name  = "never-created"
  image = "localhost/varnishgw/gateway:test"
}`,
				ExpectError: regexp.MustCompile(`context "nope" does not exist`),
			},
		},
	})
}
