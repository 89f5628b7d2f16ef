package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8srand "k8s.io/apimachinery/pkg/util/rand"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

// shopListenerHCL is the HTTPS listener "shop" whose certificate is the
// Secret shared of namespace certs.
func shopListenerHCL(certs string) string {
	return fmt.Sprintf(`
  listener {
    name     = "shop"
    port     = 443
    protocol = "HTTPS"
    hostname = "shop.example.com"
    tls {
      certificate_ref {
        name      = "shared"
        namespace = %q
      }
    }
  }
`, certs)
}

// httpsConfig is a class and a gateway "edge" in ns with an HTTP listener,
// an HTTPS listener for www.example.com with the Secrets www-cert and
// api-cert of ns, and, with cross, an HTTPS listener for shop.example.com
// with the Secret shared of namespace certs.
func httpsConfig(cp *testenv.ControlPlane, ns, certs, class, extra string, cross bool) string {
	shop := ""
	if cross {
		shop = shopListenerHCL(certs)
	}
	return tfcli.RequiredProviders + gatewayConfig(cp, ns, class, "", `
  listener {
    name = "http"
    port = 8080
  }
  listener {
    name     = "https"
    port     = 443
    protocol = "HTTPS"
    hostname = "www.example.com"
    tls {
      mode = "Terminate"
      certificate_ref {
        name = "www-cert"
      }
      certificate_ref {
        group = ""
        kind  = "Secret"
        name  = "api-cert"
      }
    }
  }
`+shop+extra)
}

// TestAccGatewayHTTPS: a gateway with HTTPS listeners, with the CLI the
// acceptance tests use (terraform, or tofu with TF_ACC_TERRAFORM_PATH).
// A certificate Secret missing at plan and one in another namespace
// without a ReferenceGrant are warnings and apply succeeds; the Gateway
// holds the references, the pods get --tls-listen and the memory-backed
// TLS volume, their Role reads exactly the referenced Secrets (checked as
// the pods' ServiceAccount), in the other namespace through a Role there;
// the private key is in neither the state nor the plan; the provider
// leaves the HTTPS listener's ResolvedRefs to the pods; removing the
// cross-namespace listener deletes that Role, destroy the rest.
func TestAccGatewayHTTPS(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns, certs := cp.Namespace(t), cp.Namespace(t)
	class := className(t, cp)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	www, wwwKey := tlsSecret(t, ns, "www-cert", "www.example.com")
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, www, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-referenced"}, StringData: map[string]string{"password": "x"}}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ws, err := tfcli.New(ctx, tfcli.Options{Dir: t.TempDir(), Env: []string{"KUBE_CONFIG_PATH=" + cp.Kubeconfig}, Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CLI: %s", ws.CLI)
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_ = ws.Destroy(ctx)
		}
	})
	if err := ws.WriteFile("main.tf", httpsConfig(cp, ns, certs, class, "", true)); err != nil {
		t.Fatal(err)
	}

	// Plan: api-cert does not exist yet, certs/shared neither, and no
	// ReferenceGrant lets the Gateway use it: warnings, not errors.
	out, err := ws.Run(ctx, "plan", "-out=https.plan", "-no-color", "-input=false")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"Warning: The certificate Secret does not exist yet",
		fmt.Sprintf(`Listener "https" references Secret %s/api-cert, which does not exist. The listener serves once it exists, without another apply`, ns),
		"Warning: The certificate Secret is in another namespace without a ReferenceGrant",
		fmt.Sprintf(`Listener "shop" references Secret %s/shared, but no ReferenceGrant in namespace %s lets Gateways of namespace %s reference it`, certs, certs, ns),
		"ResolvedRefs condition is False with reason RefNotPermitted",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the plan does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(flat, fmt.Sprintf("Secret %s/www-cert", ns)) {
		t.Errorf("the plan warns about www-cert, which exists:\n%s", out)
	}
	if _, err := ws.Run(ctx, "apply", "-no-color", "-input=false", "https.plan"); err != nil {
		t.Fatalf("apply: %v", err)
	}

	// The private key is in neither the state nor the plan, in any form
	// (PEM, its base64 body, the Secret's base64 data); the references are.
	state, err := ws.Run(ctx, "show", "-json")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := ws.Run(ctx, "show", "-json", "https.plan")
	if err != nil {
		t.Fatal(err)
	}
	keyBody := strings.Split(strings.TrimSpace(wwwKey), "\n")[1]
	for what, doc := range map[string]string{"state": state, "plan": plan} {
		for _, secret := range []string{keyBody, base64.StdEncoding.EncodeToString([]byte(wwwKey))[:40], "PRIVATE KEY"} {
			if strings.Contains(doc, secret) {
				t.Errorf("the %s holds the private key (%q)", what, secret)
			}
		}
		if !strings.Contains(doc, `"www-cert"`) || !strings.Contains(doc, `"api-cert"`) {
			t.Errorf("the %s lacks the certificate references", what)
		}
	}

	// The Gateway has the references; the API server defaults the rest.
	live, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := live.Spec.Listeners[1]
	if l.Protocol != gatewayv1.HTTPSProtocolType || l.TLS == nil || l.TLS.Mode == nil || *l.TLS.Mode != gatewayv1.TLSModeTerminate ||
		len(l.TLS.CertificateRefs) != 2 || l.TLS.CertificateRefs[0].Name != "www-cert" || l.TLS.CertificateRefs[1].Name != "api-cert" ||
		l.TLS.CertificateRefs[1].Kind == nil || *l.TLS.CertificateRefs[1].Kind != "Secret" {
		t.Errorf("listener https = %+v, tls %+v", l, l.TLS)
	}
	if s := live.Spec.Listeners[2].TLS; s == nil || s.CertificateRefs[0].Namespace == nil || string(*s.CertificateRefs[0].Namespace) != certs {
		t.Errorf("listener shop tls = %+v", s)
	}
	// Status: Accepted on every listener, ResolvedRefs only on the HTTP
	// one: the pods write it for HTTPS listeners.
	for _, ls := range live.Status.Listeners {
		if meta.FindStatusCondition(ls.Conditions, string(gatewayv1.ListenerConditionAccepted)) == nil {
			t.Errorf("listener %s has no Accepted condition", ls.Name)
		}
		rr := meta.FindStatusCondition(ls.Conditions, string(gatewayv1.ListenerConditionResolvedRefs))
		if (ls.Name == "http") != (rr != nil) {
			t.Errorf("listener %s: ResolvedRefs %+v; the provider writes it for HTTP listeners only", ls.Name, rr)
		}
	}

	// The pod template.
	d, err := getDeployment(cp, gw)
	if err != nil {
		t.Fatal(err)
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(ctr.Args, "--listen=8080") || !slices.Contains(ctr.Args, "--tls-listen=443") {
		t.Errorf("chaperone args %q: want --listen=8080 and --tls-listen=443", ctr.Args)
	}
	var tlsVol *corev1.Volume
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == gwruntime.TLSVolume {
			tlsVol = &d.Spec.Template.Spec.Volumes[i]
		}
	}
	if tlsVol == nil || tlsVol.EmptyDir == nil || tlsVol.EmptyDir.Medium != corev1.StorageMediumMemory || tlsVol.EmptyDir.SizeLimit == nil {
		t.Errorf("TLS volume %+v, want a memory-backed emptyDir with a size limit", tlsVol)
	}
	if !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == gwruntime.TLSVolume && m.MountPath == gwruntime.DefaultChaperoneFlags().TLSDir
	}) {
		t.Errorf("the chaperone does not mount the TLS volume at %s: %+v", gwruntime.DefaultChaperoneFlags().TLSDir, ctr.VolumeMounts)
	}

	// RBAC: the Role names exactly the Secrets of the gateway's namespace,
	// the Role in certs exactly shared; checked as the pods' identity.
	role, err := cp.Client.RbacV1().Roles(ns).Get(ctx, gwruntime.Name(gw), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Equal(r.Resources, []string{"secrets"}) && slices.Equal(r.ResourceNames, []string{"api-cert", "www-cert"})
	}) {
		t.Errorf("Role rules %+v lack get, list and watch of exactly api-cert and www-cert", role.Rules)
	}
	certRole, err := cp.Client.RbacV1().Roles(certs).Get(ctx, gwruntime.CertificateRoleName(gw), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Role in the certificate's namespace: %v", err)
	}
	if len(certRole.Rules) == 0 || !slices.Equal(certRole.Rules[0].ResourceNames, []string{"shared"}) || certRole.Labels[gwruntime.NamespaceLabel] != ns {
		t.Errorf("Role %s/%s = %+v", certs, certRole.Name, certRole)
	}
	cfg, err := cp.ServiceAccountConfig(ctx, ns, gwruntime.Name(gw))
	if err != nil {
		t.Fatal(err)
	}
	pods := kubernetes.NewForConfigOrDie(cfg)
	if _, err := pods.CoreV1().Secrets(ns).Get(ctx, "www-cert", metav1.GetOptions{}); err != nil {
		t.Errorf("the pods cannot read their certificate Secret: %v", err)
	}
	if _, err := pods.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=www-cert"}); err != nil {
		t.Errorf("the pods cannot watch their certificate Secret by name: %v", err)
	}
	if _, err := pods.CoreV1().Secrets(ns).Get(ctx, "not-referenced", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the pods read a Secret no listener references: %v", err)
	}
	if _, err := pods.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the pods list every Secret: %v", err)
	}
	if _, err := pods.CoreV1().Secrets(certs).Get(ctx, "shared", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("reading certs/shared as the pods: %v, want NotFound (allowed, not there yet)", err)
	}
	if _, err := pods.CoreV1().Secrets(certs).Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading certs/other as the pods: %v, want Forbidden", err)
	}

	// The pods report the certificate (one writer per field): the
	// provider's next apply neither overwrites nor deletes it.
	resolved := gatewayv1apply.Gateway("edge", ns).WithStatus(gatewayv1apply.GatewayStatus().WithListeners(
		gatewayv1apply.ListenerStatus().WithName("https").WithAttachedRoutes(0).
			WithSupportedKinds(gatewayv1apply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
			WithConditions(metav1apply.Condition().WithType(string(gatewayv1.ListenerConditionResolvedRefs)).WithStatus(metav1.ConditionFalse).
				WithReason(string(gatewayv1.ListenerReasonInvalidCertificateRef)).WithMessage("Secret api-cert does not exist.").
				WithObservedGeneration(live.Generation).WithLastTransitionTime(metav1.Now()))))
	if _, err := cp.Gateway.GatewayV1().Gateways(ns).ApplyStatus(ctx, resolved, metav1.ApplyOptions{FieldManager: "varnishgw-chaperone", Force: true}); err != nil {
		t.Fatal(err)
	}

	// The missing Secrets appear and a ReferenceGrant lets the Gateway use
	// certs/shared: no warning, no change.
	api, _ := tlsSecret(t, ns, "api-cert", "www.example.com")
	shared, _ := tlsSecret(t, certs, "shared", "shop.example.com")
	for _, s := range []*corev1.Secret{api, shared} {
		if _, err := cp.Client.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant := &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: certs, Name: "gateways-to-certs"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: gatewayv1.Namespace(ns)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
		},
	}
	if _, err := cp.Gateway.GatewayV1().ReferenceGrants(certs).Create(ctx, grant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = ws.Run(ctx, "plan", "-detailed-exitcode", "-no-color", "-input=false")
	if err != nil {
		t.Fatalf("plan once the Secrets exist: %v\n%s", err, out)
	}
	if strings.Contains(out, "Warning: The certificate") {
		t.Errorf("plan once the Secrets exist and the grant does warns:\n%s", out)
	}

	// Without the cross-namespace listener (and with HTTP/2 off): the
	// Role in certs goes, the HTTPS listener's ResolvedRefs stays the pods'.
	if err := ws.WriteFile("main.tf", httpsConfig(cp, ns, certs, class, "  http2 = false\n", false)); err != nil {
		t.Fatal(err)
	}
	if err := ws.Apply(ctx, "-no-color"); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().Roles(certs).Get(ctx, gwruntime.CertificateRoleName(gw), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Role in %s outlives the listener that needed it: %v", certs, err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings(certs).Get(ctx, gwruntime.CertificateRoleName(gw), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the RoleBinding in %s outlives the listener that needed it: %v", certs, err)
	}
	if d, err = getDeployment(cp, gw); err != nil || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--http2=false") {
		t.Errorf("http2 = false: chaperone args %v (%v)", d.Spec.Template.Spec.Containers[0].Args, err)
	}
	live, err = cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ls := range live.Status.Listeners {
		if ls.Name != "https" {
			continue
		}
		if rr := meta.FindStatusCondition(ls.Conditions, string(gatewayv1.ListenerConditionResolvedRefs)); rr == nil || rr.Reason != string(gatewayv1.ListenerReasonInvalidCertificateRef) {
			t.Errorf("after the provider's apply, the pods' ResolvedRefs of listener https is %+v", rr)
		}
	}
	if changed, err := ws.Plan(ctx); err != nil || changed {
		t.Errorf("plan after apply: changes %v, %v", changed, err)
	}

	if err := ws.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	destroyed = true
	if _, err := cp.Client.RbacV1().Roles(ns).Get(ctx, gwruntime.Name(gw), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Role outlives destroy: %v", err)
	}
	// The certificate Secrets are the user's: destroy leaves them.
	if _, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, "www-cert", metav1.GetOptions{}); err != nil {
		t.Errorf("destroy deleted the user's certificate Secret: %v", err)
	}
}

// TestAccGatewayHTTPSProviderRoles applies an HTTPS gateway with a
// certificate in another namespace as an identity holding only the
// provider's roles of the security guide (ProviderClusterRules bound
// cluster-wide, ProviderNamespaceRules in the gateway's namespace and in
// the certificate's): Kubernetes lets it write the pods' Roles, which grant
// Secrets by name, only because it holds list and watch of Secrets itself;
// without them the apply fails.
func TestAccGatewayHTTPSProviderRoles(t *testing.T) {
	cp := accPreCheck(t)
	secretsRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}}
	if !slices.ContainsFunc(ProviderNamespaceRules(), func(r rbacv1.PolicyRule) bool { return equalRule(r, secretsRule) }) {
		t.Fatalf("ProviderNamespaceRules lack %+v", secretsRule)
	}
	for _, tc := range []struct {
		name    string
		drop    bool // the secrets rule
		wantErr string
	}{
		{"the guide's roles", false, ""},
		{"without list and watch of Secrets", true, "attempting to grant RBAC permissions not currently held"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns, certs, idNS := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
			nsRules := slices.DeleteFunc(ProviderNamespaceRules(), func(r rbacv1.PolicyRule) bool { return tc.drop && equalRule(r, secretsRule) })
			cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "provider-" + idNS}, Rules: ProviderClusterRules()}
			if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: idNS, Name: "terraform"}}}
			if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
				_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
			})
			if _, err := cp.Client.CoreV1().ServiceAccounts(idNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "terraform"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{ns, certs} {
				cp.GrantRole(t, n, "provider-gateways", idNS, "terraform", nsRules)
			}
			kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, idNS, "terraform")
			if err != nil {
				t.Fatal(err)
			}
			class := className(t, cp)
			config := identityClassHCL(kubeconfig, class, ns) + fmt.Sprintf(`
resource "varnishgw_gateway" "test" {
  namespace          = %[1]q
  name               = "edge"
  gateway_class_name = varnishgw_gateway_class.test.name
  wait_for_rollout   = false
  listener {
    name     = "https"
    port     = 443
    protocol = "HTTPS"
    tls {
      certificate_ref {
        name = "www-cert"
      }
      certificate_ref {
        name      = "shared"
        namespace = %[2]q
      }
    }
  }
}
`, ns, certs)
			step := resource.TestStep{Config: config}
			if tc.wantErr != "" {
				step.ExpectError = words(tc.wantErr)
			} else {
				step.Check = func(*terraform.State) error {
					gw := object.Ref{Namespace: ns, Name: "edge"}
					if _, err := cp.Client.RbacV1().Roles(certs).Get(ctx, gwruntime.CertificateRoleName(gw), metav1.GetOptions{}); err != nil {
						return fmt.Errorf("the Role in the certificate's namespace: %w", err)
					}
					return nil
				}
			}
			// Destroy deletes the Role in the certificate's namespace too,
			// which no owner reference would.
			gone := func(*terraform.State) error {
				gw := object.Ref{Namespace: ns, Name: "edge"}
				for _, err := range []error{
					func() error {
						_, err := cp.Client.RbacV1().Roles(certs).Get(ctx, gwruntime.CertificateRoleName(gw), metav1.GetOptions{})
						return err
					}(),
					func() error {
						_, err := cp.Client.RbacV1().RoleBindings(certs).Get(ctx, gwruntime.CertificateRoleName(gw), metav1.GetOptions{})
						return err
					}(),
				} {
					if !apierrors.IsNotFound(err) {
						return fmt.Errorf("after destroy, the Role or RoleBinding in %s: %v, want NotFound", certs, err)
					}
				}
				return nil
			}
			resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: protoV6ProviderFactories, Steps: []resource.TestStep{step}, CheckDestroy: gone})
		})
	}
}

// TestAccGatewayExternalTrafficPolicy: external_traffic_policy sets the
// Service's; removing it gives the Service Kubernetes' default back, and
// neither leaves a diff.
func TestAccGatewayExternalTrafficPolicy(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + k8srand.String(6)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	policy := func(want corev1.ServiceExternalTrafficPolicy) func(*terraform.State) error {
		return func(*terraform.State) error {
			svc, err := cp.Client.CoreV1().Services(ns).Get(context.Background(), gwruntime.Name(gw), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if svc.Spec.ExternalTrafficPolicy != want {
				return fmt.Errorf("the Service's externalTrafficPolicy is %q, want %q", svc.Spec.ExternalTrafficPolicy, want)
			}
			return nil
		}
	}
	lb := listenerHCL("http", 8080) + "  service_type = \"LoadBalancer\"\n"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: gatewayConfig(cp, ns, class, "", lb+"  external_traffic_policy = \"Local\"\n"), Check: policy(corev1.ServiceExternalTrafficPolicyLocal)},
			{Config: gatewayConfig(cp, ns, class, "", lb), Check: policy(corev1.ServiceExternalTrafficPolicyCluster)},
		},
	})
}

// TestAccGatewayProxyProtocol: proxy_protocol = true gives the chaperone
// --proxy-protocol and, in sidecar mode, varnishd's HTTP sockets PROXY;
// unset or false, neither is in the pod template, and no step leaves a
// diff. proxy_protocol_sources is required with it (a plan-time error
// otherwise) and becomes main.vcl's ACL. Import reads both back.
func TestAccGatewayProxyProtocol(t *testing.T) {
	cp := accPreCheck(t)
	for _, mode := range []string{gwruntime.ModeSupervise, gwruntime.ModeSidecar} {
		t.Run(mode, func(t *testing.T) {
			ns := cp.Namespace(t)
			class := "vgw-" + k8srand.String(6)
			gw := object.Ref{Namespace: ns, Name: "edge"}
			proxied := func(want bool) func(*terraform.State) error {
				return func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					found := 0
					for _, c := range d.Spec.Template.Spec.Containers {
						switch c.Name {
						case gwruntime.ChaperoneContainer:
							found++
							if got := slices.Contains(c.Args, "--proxy-protocol"); got != want {
								return fmt.Errorf("chaperone args %q: --proxy-protocol %v, want %v", c.Args, got, want)
							}
						case gwruntime.VarnishContainer:
							found++
							wantSocket := "port-8080=:8080"
							if want {
								wantSocket += ",PROXY"
							}
							if !slices.Contains(c.Args, wantSocket) {
								return fmt.Errorf("varnish container args %q lack %s", c.Args, wantSocket)
							}
						}
					}
					if wantFound := map[string]int{gwruntime.ModeSupervise: 1, gwruntime.ModeSidecar: 2}[mode]; found != wantFound {
						return fmt.Errorf("the pod template has %d of the chaperone and varnish containers, want %d", found, wantFound)
					}
					return nil
				}
			}
			// main.vcl in the VCL ConfigMap has the ACL of the sources
			// (nil: none).
			aclOf := func(want []string) func(*terraform.State) error {
				return func(*terraform.State) error {
					cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
					if err != nil {
						return err
					}
					var got []string
					for _, p := range mainvcl.ProxySourcesOf(cm.Data[gwruntime.VCLDataKey]) {
						got = append(got, p.String())
					}
					if !slices.Equal(got, want) {
						return fmt.Errorf("main.vcl's PROXY sources %v, want %v", got, want)
					}
					return nil
				}
			}
			body := listenerHCL("http", 8080) + "  service_type = \"LoadBalancer\"\n  mode = \"" + mode + "\"\n"
			sources := "  proxy_protocol_sources = [\"192.0.2.10/32\", \"10.0.0.0/8\"]\n"
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{
					// Plan-time errors: sources are required with PROXY,
					// used only with it, and CIDRs in canonical form.
					{Config: gatewayConfig(cp, ns, class, "", body+"  proxy_protocol = true\n"), PlanOnly: true,
						ExpectError: words(`proxy_protocol = true needs proxy_protocol_sources: list the load balancer's addresses`)},
					{Config: gatewayConfig(cp, ns, class, "", body+sources), PlanOnly: true,
						ExpectError: words(`proxy_protocol_sources is used only with proxy_protocol = true \(proxy_protocol is unset\): set proxy_protocol = true or remove proxy_protocol_sources`)},
					{Config: gatewayConfig(cp, ns, class, "", body+"  proxy_protocol = true\n  proxy_protocol_sources = [\"10.0.0.1/8\"]\n"), PlanOnly: true,
						ExpectError: words(`"10\.0\.0\.1/8" is not in canonical form \(host bits set, or another spelling of the address\); write "10\.0\.0\.0/8"`)},
					{Config: gatewayConfig(cp, ns, class, "", body+"  proxy_protocol = true\n  proxy_protocol_sources = [\"lb.example.com\"]\n"), PlanOnly: true,
						ExpectError: words(`"lb\.example\.com" is not a CIDR`)},
					{Config: gatewayConfig(cp, ns, class, "", body+"  proxy_protocol = true\n"+sources), Check: resource.ComposeAggregateTestCheckFunc(
						proxied(true), aclOf([]string{"10.0.0.0/8", "192.0.2.10/32"}),
						resource.TestCheckResourceAttr("varnishgw_gateway.test", "proxy_protocol", "true"),
						resource.TestCheckTypeSetElemAttr("varnishgw_gateway.test", "proxy_protocol_sources.*", "192.0.2.10/32"))},
					// Another source: main.vcl changes.
					{Config: gatewayConfig(cp, ns, class, "", body+"  proxy_protocol = true\n  proxy_protocol_sources = [\"2001:db8::/32\"]\n"),
						Check: aclOf([]string{"2001:db8::/32"})},
					// Import reads it back from the chaperone's arguments, and
					// the sources from main.vcl.
					{ResourceName: "varnishgw_gateway.test", ImportState: true, ImportStateId: ns + "/edge", ImportStateVerify: true,
						ImportStateVerifyIgnore: []string{"wait_for_rollout"}},
					{Config: gatewayConfig(cp, ns, class, "", body), Check: resource.ComposeAggregateTestCheckFunc(
						proxied(false), aclOf(nil), resource.TestCheckNoResourceAttr("varnishgw_gateway.test", "proxy_protocol"))},
					{Config: gatewayConfig(cp, ns, class, "", body+"  proxy_protocol = false\n"), Check: resource.ComposeAggregateTestCheckFunc(
						proxied(false), resource.TestCheckResourceAttr("varnishgw_gateway.test", "proxy_protocol", "false"))},
				},
			})
		})
	}
}
