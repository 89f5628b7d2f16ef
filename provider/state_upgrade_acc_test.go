package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

// nestedAttributesRevision is the last commit whose provider stored
// varnishgw_gateway and varnishgw_http_route with nested attributes
// (schema version 0).
const nestedAttributesRevision = "d3efdee"

// upgradeConfigV0 covers every resource and most fields in the HCL of
// schema version 0: %[1]s is the namespace, %[2]s the class, %[3]s the
// namespace of a cross-namespace backend.
const upgradeConfigV0 = `
provider "varnishgw" {}

resource "varnishgw_gateway_class" "c" {
  name                 = %[2]q
  description          = "upgrade test"
  parameters_namespace = %[1]q
  image                = "localhost/varnishgw/gateway:test"
  varnishd_params      = { thread_pool_min = "20" }
  vcl                  = "sub vcl_deliver { set resp.http.x-class = \"1\"; }"
  log_level            = "warn"
}

resource "varnishgw_gateway" "gw" {
  namespace             = %[1]q
  name                  = "edge"
  gateway_class_name    = varnishgw_gateway_class.c.name
  wait_for_rollout      = false
  replicas              = 2
  drain_timeout_seconds = 30
  mode                  = "sidecar"
  service_type          = "NodePort"
  service_annotations   = { "example.com/lb" = "internal" }
  pdb_max_unavailable   = "50%%"
  rollout_timeout       = "5m"
  vcl                   = "sub vcl_deliver { set resp.http.x-gateway = \"1\"; }"
  listeners = [
    { name = "http", port = 8080, allowed_routes = { namespaces = "All" } },
    { name = "admin", port = 9090, hostname = "admin.example.com" },
    { name = "team", port = 9091, protocol = "HTTP", allowed_routes = { namespaces = "Selector", selector = { team = "shop" } } },
  ]
  resources = {
    requests = { cpu = "100m", memory = "128Mi" }
    limits   = { memory = "512Mi" }
  }
  pod = {
    image_pull_secrets = ["registry"]
    node_selector      = { "kubernetes.io/os" = "linux" }
    tolerations = [
      { key = "dedicated", operator = "Equal", value = "edge", effect = "NoSchedule" },
      { operator = "Exists", effect = "NoExecute", toleration_seconds = 30 },
    ]
    affinity            = jsonencode({ nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerms = [{ matchExpressions = [{ key = "kubernetes.io/arch", operator = "In", values = ["amd64", "arm64"] }] }] } } })
    topology_spread     = [{ topology_key = "topology.kubernetes.io/zone", max_skew = 1, min_domains = 2 }]
    priority_class_name = "system-cluster-critical"
    labels              = { team = "edge" }
    annotations         = { "prometheus.io/scrape" = "true" }
  }
  infrastructure = {
    labels         = { "example.com/cost-center" = "42" }
    annotations    = { "example.com/owner" = "platform" }
    parameters_ref = { name = "edge-params" }
  }
}

resource "varnishgw_http_route" "shop" {
  namespace = %[1]q
  name      = "shop"
  parent_refs = [
    { name = varnishgw_gateway.gw.name, section_name = "http" },
    { name = varnishgw_gateway.gw.name, namespace = %[1]q, port = 9090 },
  ]
  hostnames = ["shop.example.com", "admin.example.com"]
  rules = [
    {
      name = "api"
      matches = [
        {
          path         = { type = "PathPrefix", value = "/api" }
          headers      = [{ name = "x-beta", value = "1" }, { type = "RegularExpression", name = "accept", value = "application/.*" }]
          query_params = [{ name = "mode", value = "write" }]
          method       = "POST"
        },
        { path = { value = "/v2" } },
      ]
      filters = [
        {
          type = "RequestHeaderModifier"
          request_header_modifier = {
            set    = [{ name = "x-forwarded-host", value = "shop.example.com" }]
            add    = [{ name = "x-gateway", value = "varnishgw" }]
            remove = ["x-debug"]
          }
        },
        {
          type                     = "ResponseHeaderModifier"
          response_header_modifier = { remove = ["server"] }
        },
        {
          type           = "RequestMirror"
          request_mirror = { backend_ref = { name = "search-next", port = 80 }, percent = 25 }
        },
      ]
      backend_refs = [
        { name = "api", port = 80, weight = 90 },
        { name = "api-canary", port = 80, weight = 10 },
        { name = "payments", namespace = %[3]q, port = 80 },
      ]
      timeouts = { request = "10s", backend_request = "5s" }
    },
    {
      matches = [{ path = { type = "Exact", value = "/catalog" } }]
      filters = [{
        type             = "RequestRedirect"
        request_redirect = { scheme = "https", hostname = "www.example.com", port = 443, status_code = 301, path = { type = "ReplaceFullPath", replace_full_path = "/products" } }
      }]
    },
    {
      matches = [{ path = { type = "PathPrefix", value = "/legacy" } }]
      filters = [{
        type        = "URLRewrite"
        url_rewrite = { hostname = "old.internal", path = { type = "ReplacePrefixMatch", replace_prefix_match = "/" } }
      }]
      backend_refs = [{ name = "web", port = 80 }]
    },
    { backend_refs = [{ name = "web", port = 80 }] },
  ]
}
`

// upgradeConfigV1 is upgradeConfigV0 in the block form of schema version 1.
const upgradeConfigV1 = `
provider "varnishgw" {}

resource "varnishgw_gateway_class" "c" {
  name                 = %[2]q
  description          = "upgrade test"
  parameters_namespace = %[1]q
  image                = "localhost/varnishgw/gateway:test"
  varnishd_params      = { thread_pool_min = "20" }
  vcl                  = "sub vcl_deliver { set resp.http.x-class = \"1\"; }"
  log_level            = "warn"
}

resource "varnishgw_gateway" "gw" {
  namespace             = %[1]q
  name                  = "edge"
  gateway_class_name    = varnishgw_gateway_class.c.name
  wait_for_rollout      = false
  replicas              = 2
  drain_timeout_seconds = 30
  mode                  = "sidecar"
  service_type          = "NodePort"
  service_annotations   = { "example.com/lb" = "internal" }
  pdb_max_unavailable   = "50%%"
  rollout_timeout       = "5m"
  vcl                   = "sub vcl_deliver { set resp.http.x-gateway = \"1\"; }"

  listener {
    name = "http"
    port = 8080
    allowed_routes {
      namespaces = "All"
    }
  }
  listener {
    name     = "admin"
    port     = 9090
    hostname = "admin.example.com"
  }
  listener {
    name     = "team"
    port     = 9091
    protocol = "HTTP"
    allowed_routes {
      namespaces = "Selector"
      selector   = { team = "shop" }
    }
  }

  resources {
    requests = { cpu = "100m", memory = "128Mi" }
    limits   = { memory = "512Mi" }
  }

  pod {
    image_pull_secrets  = ["registry"]
    node_selector       = { "kubernetes.io/os" = "linux" }
    affinity            = jsonencode({ nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerms = [{ matchExpressions = [{ key = "kubernetes.io/arch", operator = "In", values = ["amd64", "arm64"] }] }] } } })
    priority_class_name = "system-cluster-critical"
    labels              = { team = "edge" }
    annotations         = { "prometheus.io/scrape" = "true" }
    toleration {
      key      = "dedicated"
      operator = "Equal"
      value    = "edge"
      effect   = "NoSchedule"
    }
    toleration {
      operator           = "Exists"
      effect             = "NoExecute"
      toleration_seconds = 30
    }
    topology_spread {
      topology_key = "topology.kubernetes.io/zone"
      max_skew     = 1
      min_domains  = 2
    }
  }

  infrastructure {
    labels      = { "example.com/cost-center" = "42" }
    annotations = { "example.com/owner" = "platform" }
    parameters_ref {
      name = "edge-params"
    }
  }
}

resource "varnishgw_http_route" "shop" {
  namespace = %[1]q
  name      = "shop"
  hostnames = ["shop.example.com", "admin.example.com"]

  parent_ref {
    name         = varnishgw_gateway.gw.name
    section_name = "http"
  }
  parent_ref {
    name      = varnishgw_gateway.gw.name
    namespace = %[1]q
    port      = 9090
  }

  rule {
    name = "api"
    match {
      method = "POST"
      path {
        type  = "PathPrefix"
        value = "/api"
      }
      header {
        name  = "x-beta"
        value = "1"
      }
      header {
        type  = "RegularExpression"
        name  = "accept"
        value = "application/.*"
      }
      query_param {
        name  = "mode"
        value = "write"
      }
    }
    match {
      path {
        value = "/v2"
      }
    }
    filter {
      type = "RequestHeaderModifier"
      request_header_modifier {
        remove = ["x-debug"]
        set {
          name  = "x-forwarded-host"
          value = "shop.example.com"
        }
        add {
          name  = "x-gateway"
          value = "varnishgw"
        }
      }
    }
    filter {
      type = "ResponseHeaderModifier"
      response_header_modifier {
        remove = ["server"]
      }
    }
    filter {
      type = "RequestMirror"
      request_mirror {
        percent = 25
        backend_ref {
          name = "search-next"
          port = 80
        }
      }
    }
    backend_ref {
      name   = "api"
      port   = 80
      weight = 90
    }
    backend_ref {
      name   = "api-canary"
      port   = 80
      weight = 10
    }
    backend_ref {
      name      = "payments"
      namespace = %[3]q
      port      = 80
    }
    timeouts {
      request         = "10s"
      backend_request = "5s"
    }
  }

  rule {
    match {
      path {
        type  = "Exact"
        value = "/catalog"
      }
    }
    filter {
      type = "RequestRedirect"
      request_redirect {
        scheme      = "https"
        hostname    = "www.example.com"
        port        = 443
        status_code = 301
        path {
          type              = "ReplaceFullPath"
          replace_full_path = "/products"
        }
      }
    }
  }

  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/legacy"
      }
    }
    filter {
      type = "URLRewrite"
      url_rewrite {
        hostname = "old.internal"
        path {
          type                 = "ReplacePrefixMatch"
          replace_prefix_match = "/"
        }
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
  }

  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`

// TestAccStateUpgradeFromNestedAttributes applies a configuration with the
// provider of nestedAttributesRevision (built from git), then plans the
// same configuration in block form with this provider through the real
// CLI (make testacc: terraform, make testacc-tofu: OpenTofu): the stored
// state upgrades itself and the plan shows no changes. After an apply, the
// state holds every value in the new blocks.
func TestAccStateUpgradeFromNestedAttributes(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	oldProvider, err := tfcli.BuildProviderAt(ctx, nestedAttributesRevision)
	if err != nil {
		t.Fatal(err)
	}
	ns, other := cp.Namespace(t), cp.Namespace(t)
	for _, svc := range []string{"web", "api", "api-canary", "search-next"} {
		createService(t, cp, ns, svc)
	}
	createService(t, cp, other, "payments")
	params := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "edge-params", Namespace: ns}, Data: map[string]string{"log-level": "debug"}}
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, params, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := "upgrade-" + rand.String(6)
	t.Cleanup(func() { _ = cp.Gateway.GatewayV1().GatewayClasses().Delete(ctx, class, metav1.DeleteOptions{}) })
	dir := t.TempDir()
	env := []string{"KUBE_CONFIG_PATH=" + cp.Kubeconfig}

	old, err := tfcli.New(ctx, tfcli.Options{Dir: dir, ProviderDir: oldProvider, Env: env, Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CLI: %s; the provider of %s from %s", old.CLI, nestedAttributesRevision, oldProvider)
	if err := old.WriteFile("main.tf", tfcli.RequiredProviders+fmt.Sprintf(upgradeConfigV0, ns, class, other)); err != nil {
		t.Fatal(err)
	}
	if err := old.Apply(ctx); err != nil {
		t.Fatalf("apply with the provider of %s: %v", nestedAttributesRevision, err)
	}
	if changed, err := old.Plan(ctx); err != nil || changed {
		t.Fatalf("plan with the provider of %s after its apply: changes %v, %v", nestedAttributesRevision, changed, err)
	}

	cur, err := tfcli.New(ctx, tfcli.Options{Dir: dir, Env: env, Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cur.Destroy(ctx); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	// The old configuration fails validate with this provider, naming what
	// to rewrite, before anything is planned.
	out, err := cur.Run(ctx, "validate", "-no-color")
	if err == nil || !strings.Contains(err.Error()+out, `An argument named "listeners" is not expected here`) ||
		!strings.Contains(err.Error()+out, `An argument named "parent_refs" is not expected here`) {
		t.Fatalf("validate of the version 0 configuration with this provider: %v\n%s", err, out)
	}
	if err := cur.WriteFile("main.tf", tfcli.RequiredProviders+fmt.Sprintf(upgradeConfigV1, ns, class, other)); err != nil {
		t.Fatal(err)
	}
	// The first plan changes no argument: only computed values the
	// upgrade moves (each route's routing is stored in RoutingFragments
	// from now on, which the earlier release did not have, and the gateway's
	// pods roll to carry their report's identity).
	if out, err = cur.Run(ctx, "plan", "-out=upgrade.plan", "-no-color", "-input=false"); err != nil {
		t.Fatalf("plan with this provider on the upgraded state: %v\n%s", err, out)
	}
	planJSON, err := cur.Run(ctx, "show", "-json", "upgrade.plan")
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions      []string       `json:"actions"`
				Before       map[string]any `json:"before"`
				After        map[string]any `json:"after"`
				AfterUnknown map[string]any `json:"after_unknown"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(planJSON), &plan); err != nil {
		t.Fatal(err)
	}
	computed := map[string]bool{"routing": true, "addresses": true, "conditions": true, "listener_attached_routes": true,
		"main_vcl_sha256": true, "start_hash": true}
	for _, rc := range plan.ResourceChanges {
		if slices.Contains(rc.Change.Actions, "create") || slices.Contains(rc.Change.Actions, "delete") {
			t.Errorf("%s: the upgrade plans %v", rc.Address, rc.Change.Actions)
		}
		for k, after := range rc.Change.After {
			if computed[k] || rc.Change.AfterUnknown[k] == true {
				continue
			}
			if b, _ := json.Marshal(rc.Change.Before[k]); string(b) != mustJSON(after) {
				t.Errorf("%s: the upgrade changes the argument %s from %s to %s", rc.Address, k, b, mustJSON(after))
			}
		}
	}
	// An apply stores the upgraded state; it holds every value, and the
	// next plan is empty.
	if err := cur.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if changed, err := cur.Plan(ctx); err != nil || changed {
		t.Fatalf("plan after the upgrade's apply: changes %v, %v", changed, err)
	}
	showOut, err := cur.Run(ctx, "show", "-json")
	if err != nil {
		t.Fatal(err)
	}
	var show struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Address       string         `json:"address"`
					SchemaVersion int            `json:"schema_version"`
					Values        map[string]any `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal([]byte(showOut), &show); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, r := range show.Values.RootModule.Resources {
		got[r.Address] = r.Values
		if r.Address != "varnishgw_gateway_class.c" && r.SchemaVersion != 1 {
			t.Errorf("%s is stored with schema version %d, want 1", r.Address, r.SchemaVersion)
		}
	}
	for _, c := range []struct {
		addr, path string
		want       any
	}{
		{"varnishgw_http_route.shop", "rule.0.backend_ref.0.weight", 90.0},
		{"varnishgw_http_route.shop", "rule.0.backend_ref.2.namespace", other},
		{"varnishgw_http_route.shop", "rule.0.match.0.header.1.type", "RegularExpression"},
		{"varnishgw_http_route.shop", "rule.0.match.0.query_param.0.name", "mode"},
		{"varnishgw_http_route.shop", "rule.0.filter.0.request_header_modifier.add.0.value", "varnishgw"},
		{"varnishgw_http_route.shop", "rule.0.filter.2.request_mirror.backend_ref.name", "search-next"},
		{"varnishgw_http_route.shop", "rule.0.timeouts.backend_request", "5s"},
		{"varnishgw_http_route.shop", "rule.1.filter.0.request_redirect.path.replace_full_path", "/products"},
		{"varnishgw_http_route.shop", "parent_ref.1.port", 9090.0},
		{"varnishgw_gateway.gw", "listener.2.allowed_routes.selector.team", "shop"},
		{"varnishgw_gateway.gw", "listener.1.allowed_routes", nil},
		{"varnishgw_gateway.gw", "pod.toleration.1.toleration_seconds", 30.0},
		{"varnishgw_gateway.gw", "pod.topology_spread.0.min_domains", 2.0},
		{"varnishgw_gateway.gw", "infrastructure.parameters_ref.name", "edge-params"},
		{"varnishgw_gateway.gw", "resources.limits.memory", "512Mi"},
	} {
		if v := lookup(got[c.addr], c.path); v != c.want {
			t.Errorf("%s %s = %#v after the upgrade, want %#v", c.addr, c.path, v, c.want)
		}
	}
	if changed, err := cur.Plan(ctx); err != nil || changed {
		t.Errorf("plan after the apply: changes %v, %v", changed, err)
	}
}

// lookup follows a dotted path (list indexes as numbers) in decoded JSON.
func lookup(v any, p string) any {
	for _, step := range strings.Split(p, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[step]
		case []any:
			var i int
			if _, err := fmt.Sscan(step, &i); err != nil || i >= len(x) {
				return fmt.Sprintf("<no %s>", p)
			}
			v = x[i]
		default:
			return fmt.Sprintf("<no %s>", p)
		}
	}
	return v
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
