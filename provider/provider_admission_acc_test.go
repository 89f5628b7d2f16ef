package provider

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// guideAdmissionPolicy is the security guide's ValidatingAdmissionPolicy and
// its binding (the guide's second YAML block), for the identity user and
// renamed with suffix so that tests do not share them.
func guideAdmissionPolicy(t *testing.T, user, suffix string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	data, err := os.ReadFile("../templates/guides/security.md.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(data, -1)
	if len(blocks) < 2 {
		t.Fatalf("%d YAML blocks in the security guide, want the roles and the admission policy", len(blocks))
	}
	const placeholder = `"system:serviceaccount:varnishgw:terraform"`
	if !bytes.Contains(blocks[1][1], []byte(placeholder)) {
		t.Fatalf("the guide's admission policy does not name %s", placeholder)
	}
	docs := bytes.Split(bytes.ReplaceAll(blocks[1][1], []byte(placeholder), []byte(fmt.Sprintf("%q", user))), []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("%d YAML documents in the guide's admission policy block, want 2", len(docs))
	}
	var p admissionv1.ValidatingAdmissionPolicy
	var b admissionv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict(docs[0], &p); err != nil {
		t.Fatalf("the guide's ValidatingAdmissionPolicy: %v", err)
	}
	if err := yaml.UnmarshalStrict(docs[1], &b); err != nil {
		t.Fatalf("the guide's ValidatingAdmissionPolicyBinding: %v", err)
	}
	if b.Spec.PolicyName != p.Name {
		t.Fatalf("the guide's binding names policy %q, the policy is %q", b.Spec.PolicyName, p.Name)
	}
	p.Name += "-" + suffix
	b.Name += "-" + suffix
	b.Spec.PolicyName = p.Name
	return &p, &b
}

// installAdmissionPolicy creates the guide's policy for the provider
// identity kube acts as and waits until the API server enforces it.
func installAdmissionPolicy(t *testing.T, cp *testenv.ControlPlane, kube kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	user := "system:serviceaccount:" + ns + ":terraform"
	p, b := guideAdmissionPolicy(t, user, ns)
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
		_ = cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	})
	// Enforced once a probe Role without the label is refused (the API
	// server loads policies asynchronously).
	probe := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "varnishgw-probe"}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := kube.RbacV1().Roles(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "varnishgw-provider-rbac") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admission policy is not enforced after 60s: a dry-run create of an unlabelled Role gave %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAccProviderAdmissionPolicy: with the security guide's
// ValidatingAdmissionPolicy, the provider's identity (the guide's roles,
// its real token) is refused on RBAC objects it does not own (a foreign
// Role, a foreign ClusterRoleBinding, an object renamed into its prefix
// without the label) and on an aggregated ClusterRole, may still write its
// own, and applies and destroys a gateway with the invalidation endpoint
// and a route with a backend in another namespace under it.
func TestAccProviderAdmissionPolicy(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns, apps := cp.Namespace(t), cp.Namespace(t)
	kubeconfig, kube := providerIdentity(t, cp, ProviderClusterRules(), ns, apps)
	// providerIdentity's ServiceAccount lives in a namespace of its own:
	// find it from the binding it made.
	idNS := ""
	for _, n := range []string{ns, apps} {
		rbs, err := cp.Client.RbacV1().RoleBindings(n).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, rb := range rbs.Items {
			for _, s := range rb.Subjects {
				if s.Name == "terraform" {
					idNS = s.Namespace
				}
			}
		}
	}
	if idNS == "" {
		t.Fatal("no binding of the provider identity")
	}
	foreign := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	foreignCRB := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "team-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "team"}}}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, foreignCRB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), foreignCRB.Name, metav1.DeleteOptions{})
	})
	unlabelled := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "varnishgw-not-ours"}}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, unlabelled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	installAdmissionPolicy(t, cp, kube, idNS)

	owned := map[string]string{"app.kubernetes.io/managed-by": "varnishgw"}
	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s as the provider: %v, want refused with %q", what, err, want)
		}
	}
	_, err := kube.RbacV1().Roles(ns).Patch(ctx, foreign.Name, "application/merge-patch+json", []byte(`{"rules":[]}`), metav1.PatchOptions{})
	refused("cutting down a foreign Role's rules", err, "writes and deletes only RBAC objects named varnishgw-")
	refused("deleting a foreign ClusterRoleBinding", kube.RbacV1().ClusterRoleBindings().Delete(ctx, foreignCRB.Name, metav1.DeleteOptions{}),
		"writes and deletes only RBAC objects")
	_, err = kube.RbacV1().Roles(ns).Patch(ctx, unlabelled.Name, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"varnishgw"}}}`), metav1.PatchOptions{})
	refused("labelling a Role it did not create", err, "does not take over an RBAC object it did not create")
	agg := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "varnishgw-agg-" + ns,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "varnishgw", "rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}}}}
	_, err = kube.RbacV1().ClusterRoles().Create(ctx, agg, metav1.CreateOptions{})
	refused("an aggregated ClusterRole", err, "writes no aggregated ClusterRole")
	mine := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "varnishgw-mine", Labels: owned},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}}}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating its own Role: %v", err)
	} else if err := kube.RbacV1().Roles(ns).Delete(ctx, mine.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting its own Role: %v", err)
	}

	createService(t, cp, apps, "api")
	class := className(t, cp)
	config := identityClassHCL(kubeconfig, class, ns) + fmt.Sprintf(`
resource "varnishgw_gateway" "test" {
  namespace                  = %[1]q
  name                       = "edge"
  gateway_class_name         = varnishgw_gateway_class.test.name
  wait_for_rollout           = false
  invalidation_endpoint_port = 9092
  listener {
    name = "http"
    port = 8080
    allowed_routes {
      namespaces = "All"
    }
  }
}

resource "varnishgw_http_route" "test" {
  namespace       = %[2]q
  name            = "web"
  wait_for_served = false
  parent_ref {
    name      = varnishgw_gateway.test.name
    namespace = %[1]q
  }
  rule {
    backend_ref {
      name = "api"
      port = 80
    }
  }
}
`, ns, apps)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps:                    []resource.TestStep{{Config: config}},
	})
}
