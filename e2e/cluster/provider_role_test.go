package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
	"github.com/varnishgw/terraform-provider-varnishgw/provider"
)

// providerRoleHCL is a class, a sidecar gateway whose listener takes
// routes from labelled namespaces, a route to a backend in the gateway's
// namespace and one to a backend in another namespace (with a
// ReferenceGrant), a ListenerSet of the gateway's namespace with a route
// on its own port, and both data sources. %[1]s is the kubeconfig, %[2]s
// the namespace, %[3]s the image, %[4]s the backend namespace, %[5]s the
// class's varnishd_params, %[6]s the mode, %[7]s further gateway arguments.
const providerRoleHCL = tfcli.RequiredProviders + `
provider "varnishgw" {
  config_path = %[1]q
}

resource "varnishgw_gateway_class" "c" {
  name                 = "role-%[2]s"
  parameters_namespace = %[2]q
  image                = %[3]q
  varnishd_params      = %[5]s
}

resource "varnishgw_gateway" "g" {
  namespace          = %[2]q
  name               = "edge"
  gateway_class_name = varnishgw_gateway_class.c.name
  mode               = %[6]q
  rollout_timeout    = "4m"
%[7]s

  listener {
    name     = "http"
    port     = 80
    protocol = "HTTP"
    allowed_routes {
      namespaces = "Selector"
      selector   = { "varnishgw-role-test" = "yes" }
    }
  }

  allowed_listeners {
    namespaces = "Same"
  }
}

resource "varnishgw_listener_set" "extra" {
  namespace = %[2]q
  name      = "extra"
  parent_ref {
    name = varnishgw_gateway.g.name
  }
  listener {
    name     = "extra"
    port     = 8081
    hostname = "extra.role.test"
  }
}

resource "varnishgw_http_route" "extra" {
  namespace = %[2]q
  name      = "extra"
  parent_ref {
    kind = "ListenerSet"
    name = varnishgw_listener_set.extra.name
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}

resource "varnishgw_http_route" "www" {
  namespace = %[2]q
  name      = "www"
  hostnames = ["www.role.test"]
  parent_ref {
    name = varnishgw_gateway.g.name
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/api"
      }
    }
    backend_ref {
      name      = "api"
      namespace = %[4]q
      port      = 80
    }
  }
}

resource "varnishgw_cache_invalidation" "www" {
  gateway_namespace = %[2]q
  gateway_name      = varnishgw_gateway.g.name
  purge {
    host = "www.role.test"
    path = "/"
  }
  depends_on = [varnishgw_http_route.www]
}

data "varnishgw_gateway" "g" {
  namespace  = %[2]q
  name       = varnishgw_gateway.g.name
  depends_on = [varnishgw_http_route.www]
}

data "varnishgw_routing" "g" {
  namespace         = %[2]q
  name              = varnishgw_gateway.g.name
  resolve_endpoints = true
  depends_on        = [varnishgw_http_route.www]
}
`

// TestProviderLeastPrivilege runs the provider's whole lifecycle as a
// ServiceAccount that has exactly the two roles of the security guide
// (provider.ProviderClusterRules bound cluster-wide,
// provider.ProviderNamespaceRules bound in the gateway's namespace):
// installing the varnishgw.dev CRDs, a class, a sidecar gateway whose pods
// become Ready, routes to backends in two namespaces (waiting until the
// pods serve them), a ListenerSet adding a port and a route served on it, a cache invalidation (waiting until the pods applied
// it), both data sources, the invalidation endpoint (its ClusterRoleBinding
// to system:auth-delegator), a change that rolls the pods, a
// mode change that also turns the endpoint off, and destroy. Every request succeeds, and the API server's
// audit log shows that the identity used every right it holds, apart from
// the ones it holds only to grant them to the gateway pods
// (provider.GrantOnly), which it never used.
func TestProviderLeastPrivilege(t *testing.T) {
	c := newCluster(t)
	ctx := c.ctx
	backends := c.cp.Namespace(t)
	for _, ns := range []string{c.ns, backends} {
		n, err := c.cp.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["varnishgw-role-test"] = "yes"
		if _, err := c.cp.Client.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.echo("web", 1)
	api := *c
	api.ns = backends
	api.echo("api", 1)
	grant := &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: backends, Name: "from-gateway-ns"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(c.ns)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
	if _, err := c.cp.Gateway.GatewayV1().ReferenceGrants(backends).Create(ctx, grant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The provider's identity, with the two roles and nothing else.
	idNS := c.cp.Namespace(t)
	suffix := "-" + c.ns
	roles := []rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: provider.ProviderClusterRoleName + suffix}, Rules: provider.ProviderClusterRules()},
		{ObjectMeta: metav1.ObjectMeta{Name: provider.ProviderNamespaceRoleName + suffix}, Rules: provider.ProviderNamespaceRules()},
	}
	for i := range roles {
		if _, err := c.cp.Client.RbacV1().ClusterRoles().Create(ctx, &roles[i], metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name := roles[i].Name
		t.Cleanup(func() {
			_ = c.cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	if _, err := c.cp.Client.CoreV1().ServiceAccounts(idNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "terraform"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: idNS, Name: "terraform"}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roles[0].Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roles[0].Name},
		Subjects:   subject,
	}
	if _, err := c.cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	if _, err := c.cp.Client.RbacV1().RoleBindings(c.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "terraform-gateways"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roles[1].Name},
		Subjects:   subject,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := c.cp.ServiceAccountKubeconfig(ctx, idNS, "terraform")
	if err != nil {
		t.Fatal(err)
	}

	// No varnishgw.dev CRDs yet: the provider installs them.
	ext := apiextensionsclient.NewForConfigOrDie(c.cp.Config)
	for _, crd := range vgwapi.CRDs() {
		if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Fatalf("CRD %s not deleted: %v", crd.Name, err)
		}
	}

	tf := c.terraform()
	tf.noKubeconfigVar = true
	const endpoint = "  invalidation_endpoint_port = 9092"
	hcl := func(params, mode, extra string) string {
		return fmt.Sprintf(providerRoleHCL, kubeconfig, c.ns, c.images.Gateway.Name, backends, params, mode, extra)
	}
	tf.write(hcl("{}", "sidecar", endpoint))
	tf.mustRun("apply")
	gw := object.Ref{Namespace: c.ns, Name: "edge"}
	pods := c.gatewayPods(gw)
	if len(pods) != 1 {
		t.Fatalf("gateway pods: %v", podNames(pods))
	}
	addr := net.JoinHostPort(pods[0].Status.PodIP, "80")
	expect(t, addr, demo.Request{Host: "www.role.test", Path: "/"}, 200, "web-")
	expect(t, addr, demo.Request{Host: "www.role.test", Path: "/api"}, 200, "api-")
	expect(t, net.JoinHostPort(pods[0].Status.PodIP, "8081"), demo.Request{Host: "extra.role.test", Path: "/"}, 200, "web-")

	// A change that rolls the pods, and back to supervise mode (the
	// provider deletes the admin Secret) without the invalidation endpoint.
	tf.write(hcl(`{ default_grace = "20" }`, "sidecar", endpoint))
	tf.mustRun("apply")
	// supervise mode without the endpoint: the provider deletes its
	// ClusterRoleBinding.
	tf.write(hcl(`{ default_grace = "20" }`, "supervise", ""))
	tf.mustRun("apply")
	tf.mustRun("plan", "-detailed-exitcode")
	tf.mustRun("destroy")

	events, err := c.cp.AuditEvents(idNS, "terraform")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, e := range events {
		if e.ObjectRef == nil {
			continue // discovery and other non-resource requests
		}
		res := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			res += "/" + e.ObjectRef.Subresource
		}
		key := e.ObjectRef.APIGroup + "/" + res + " " + e.Verb
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			t.Errorf("the provider's identity was refused %s %s/%s", key, e.ObjectRef.Namespace, e.ObjectRef.Name)
		}
		used[key] = true
		if e.Verb == "patch" && e.ResponseStatus != nil && e.ResponseStatus.Code == 201 {
			// A server-side apply that created the object needed create.
			used[e.ObjectRef.APIGroup+"/"+res+" create"] = true
		}
	}
	t.Logf("%d requests by the provider's identity", len(events))
	for _, rules := range [][]rbacv1.PolicyRule{provider.ProviderClusterRules(), provider.ProviderNamespaceRules()} {
		for _, r := range rules {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					key := r.APIGroups[0] + "/" + res + " " + verb
					grantOnly := slices.Contains(provider.GrantOnly, key)
					switch {
					case used[key] && grantOnly:
						t.Errorf("%s is listed as held only to grant it, but the provider used it", key)
					case !used[key] && !grantOnly:
						t.Errorf("the provider's role grants %s, which the lifecycle never used: drop it, or list it in GrantOnly if the gateway's roles need it", key)
					}
				}
			}
		}
	}
	if t.Failed() {
		var keys []string
		for k := range used {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		t.Logf("rights used:\n%s", strings.Join(keys, "\n"))
	}
}
