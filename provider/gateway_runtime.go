package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1apply "k8s.io/client-go/applyconfigurations/policy/v1"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// gatewayClassDefaults reads the GatewayClass name and its parameters
// ConfigMap. The class must be served by varnishgw and name an image.
func (c *clients) gatewayClassDefaults(ctx context.Context, name string) (*gwruntime.Class, error) {
	gc, err := c.Gateway.GatewayV1().GatewayClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("gateway_class_name %q: the GatewayClass does not exist; create it first (resource varnishgw_gateway_class) or fix the name", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get GatewayClass %s: %w", name, err)
	}
	if gc.Spec.ControllerName != ControllerName {
		return nil, fmt.Errorf("gateway_class_name %q: the GatewayClass has controllerName %q, not %q, so varnishgw does not serve it; use a class created by varnishgw_gateway_class",
			name, gc.Spec.ControllerName, ControllerName)
	}
	ref := gc.Spec.ParametersRef
	if ref == nil {
		return nil, fmt.Errorf("GatewayClass %s has no parametersRef, so its gateways have no image; apply its varnishgw_gateway_class again", name)
	}
	if ref.Kind != "ConfigMap" || ref.Group != "" || ref.Namespace == nil {
		return nil, fmt.Errorf("GatewayClass %s: parametersRef %s/%s is not a namespaced core ConfigMap; apply its varnishgw_gateway_class again", name, ref.Kind, ref.Name)
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(string(*ref.Namespace)).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the parameters ConfigMap %s/%s of GatewayClass %s: %w", *ref.Namespace, ref.Name, name, err)
	}
	d := gwruntime.NewClass()
	if err := d.Merge(cm.Data, true); err != nil {
		return nil, fmt.Errorf("GatewayClass %s: parameters ConfigMap %s/%s: %w; apply its varnishgw_gateway_class again", name, *ref.Namespace, ref.Name, err)
	}
	if d.Image == "" {
		return nil, fmt.Errorf("GatewayClass %s: parameters ConfigMap %s/%s has no %s, so its gateways have no image; set image on its varnishgw_gateway_class and apply it",
			name, *ref.Namespace, ref.Name, gwruntime.ClassKeyImage)
	}
	return d, nil
}

// varnishdArgs is the command line of varnishd in the varnish container
// of sidecar mode: the sockets, admin connection, secret and boot VCL the
// chaperone expects (design/chaperone.md, "sidecar").
func varnishdArgs(s *gwruntime.Spec) []string {
	cfg := varnishd.Config{WorkDir: gwruntime.WorkDir, GhostAdminAddr: gwruntime.GhostAdminAddr, Storage: []string{s.Class.Storage}}
	for _, p := range s.Ports {
		if slices.Contains(s.TLSPorts, p) {
			// hitch (in the chaperone container) hands the connections
			// of an HTTPS port to this Unix socket, with a PROXY header.
			cfg.Listeners = append(cfg.Listeners, varnishd.TLSListener(gwruntime.DefaultChaperoneFlags().TLSDir, int(p)))
			continue
		}
		// With proxy_protocol the load balancer's PROXY header comes first
		// on every connection (the chaperone does the same in supervise
		// mode).
		cfg.Listeners = append(cfg.Listeners, varnishd.Listener{Name: routing.SocketName(gatewayv1.PortNumber(p)), Addr: fmt.Sprintf(":%d", p), Proxy: s.ProxyProtocol})
	}
	for _, k := range slices.Sorted(maps.Keys(s.Class.Params)) {
		cfg.Params = append(cfg.Params, k+"="+s.Class.Params[k])
	}
	// The gateway's varnishd defaults, as the chaperone passes them in
	// supervise mode; a class parameter of the same name replaces one.
	cfg.Params = varnishd.WithDefaults(cfg.Params)
	if len(s.TLSPorts) > 0 && !s.NoHTTP2 {
		cfg.Params = append(cfg.Params, "feature=+http2")
	}
	return varnishd.Args(cfg, gwruntime.AdminAddr, gwruntime.SecretFile, gwruntime.BootVCLFile)
}

// runtimeDrift compares the runtime objects in the cluster with s and
// says what differs: a missing object, changed RBAC rules, missing labels
// or annotations, a Deployment that the provider's apply would change (dry
// is its dry run, dryRunDeployment), or changed Service ports. Empty when the
// runtime is intact.
func (c *clients) runtimeDrift(ctx context.Context, s *gwruntime.Spec, dry *appsv1.Deployment) (string, error) {
	ns, name := s.Gateway.Namespace, s.Name()
	lbl, ann := s.ObjectLabels(), s.ObjectAnnotations()
	missing := func(what string, err error) (string, error) {
		if apierrors.IsNotFound(err) {
			return what + " is missing", nil
		}
		return "", fmt.Errorf("get %s: %w", what, err)
	}
	relabelled := func(what string, o metav1.Object) string {
		if !hasMetadata(o, lbl, ann) {
			return "the labels or annotations of " + what + " changed"
		}
		return ""
	}
	sa, err := c.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("ServiceAccount "+ns+"/"+name, err)
	}
	if d := relabelled("ServiceAccount "+ns+"/"+name, sa); d != "" {
		return d, nil
	}
	role, err := c.Kube.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("Role "+ns+"/"+name, err)
	}
	if !equality.Semantic.DeepEqual(role.Rules, s.GatewayRules()) {
		return "the rules of Role " + ns + "/" + name + " changed", nil
	}
	if d := relabelled("Role "+ns+"/"+name, role); d != "" {
		return d, nil
	}
	rb, err := c.Kube.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("RoleBinding "+ns+"/"+name, err)
	}
	if rb.RoleRef.Name != name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != name || rb.Subjects[0].Namespace != ns {
		return "RoleBinding " + ns + "/" + name + " changed", nil
	}
	if d := relabelled("RoleBinding "+ns+"/"+name, rb); d != "" {
		return d, nil
	}
	cr, err := c.Kube.RbacV1().ClusterRoles().Get(ctx, gwruntime.BackendClusterRoleName(s.Gateway), metav1.GetOptions{})
	if err != nil {
		return missing("ClusterRole "+gwruntime.BackendClusterRoleName(s.Gateway), err)
	}
	if !equality.Semantic.DeepEqual(cr.Rules, gwruntime.BackendRules()) {
		return "the rules of ClusterRole " + cr.Name + " changed", nil
	}
	if d := relabelled("ClusterRole "+cr.Name, cr); d != "" {
		return d, nil
	}
	d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("Deployment "+ns+"/"+name, err)
	}
	if diff := deploymentDrift(d, dry); diff != "" {
		return "the Deployment " + ns + "/" + name + " differs from what the provider writes in " + diff, nil
	}
	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("Service "+ns+"/"+name, err)
	}
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	if !slices.Equal(ports, s.Ports) || !equality.Semantic.DeepEqual(svc.Spec.Selector, gwruntime.Labels(s.Gateway)) {
		return "the ports or selector of Service " + ns + "/" + name + " changed", nil
	}
	if d := relabelled("Service "+ns+"/"+name, svc); d != "" {
		return d, nil
	}
	others := s.CertificateSecretNames()
	delete(others, ns)
	for _, other := range slices.Sorted(maps.Keys(others)) {
		what := "Role " + other + "/" + gwruntime.CertificateRoleName(s.Gateway)
		r, err := c.Kube.RbacV1().Roles(other).Get(ctx, gwruntime.CertificateRoleName(s.Gateway), metav1.GetOptions{})
		if err != nil {
			return missing(what, err)
		}
		if !equality.Semantic.DeepEqual(r.Rules, gwruntime.CertificateRules(others[other], true)) {
			return "the rules of " + what + " changed", nil
		}
		if _, err := c.Kube.RbacV1().RoleBindings(other).Get(ctx, gwruntime.CertificateRoleName(s.Gateway), metav1.GetOptions{}); err != nil {
			return missing("RoleBinding "+other+"/"+gwruntime.CertificateRoleName(s.Gateway), err)
		}
	}
	lsets := s.ListenerSetNames()
	for _, other := range slices.Sorted(maps.Keys(lsets)) {
		roleName := gwruntime.ListenerSetStatusRoleName(s.Gateway)
		what := "Role " + other + "/" + roleName
		r, err := c.Kube.RbacV1().Roles(other).Get(ctx, roleName, metav1.GetOptions{})
		if err != nil {
			return missing(what, err)
		}
		if !equality.Semantic.DeepEqual(r.Rules, gwruntime.ListenerSetStatusRules(lsets[other])) {
			return "the rules of " + what + " changed", nil
		}
		if _, err := c.Kube.RbacV1().RoleBindings(other).Get(ctx, roleName, metav1.GetOptions{}); err != nil {
			return missing("RoleBinding "+other+"/"+roleName, err)
		}
	}
	if d, err := c.invalidateAuthBindingDrift(ctx, s); d != "" || err != nil {
		return d, err
	}
	if s.Mode == gwruntime.ModeSidecar {
		sec, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, gwruntime.AdminSecretName(s.Gateway), metav1.GetOptions{})
		if err != nil {
			return missing("Secret "+ns+"/"+gwruntime.AdminSecretName(s.Gateway), err)
		}
		if d := relabelled("Secret "+ns+"/"+sec.Name, sec); d != "" {
			return d, nil
		}
	}
	return "", nil
}

// dryRunDeployment is the gateway's Deployment as the API server would
// store it after the provider's apply (a server-side dry run): defaults
// set, and other field managers' fields kept. An invalid pod template is
// an error the API server words, naming the field.
func (c *clients) dryRunDeployment(ctx context.Context, s *gwruntime.Spec) (*appsv1.Deployment, error) {
	opts := applyOptions()
	opts.DryRun = []string{metav1.DryRunAll}
	d, err := c.Kube.AppsV1().Deployments(s.Gateway.Namespace).Apply(ctx, s.Deployment(), opts)
	if err != nil {
		return nil, fmt.Errorf("dry run of the Deployment %s/%s: %w", s.Gateway.Namespace, s.Name(), err)
	}
	return d, nil
}

// gatewayOwner is the owner reference of a gateway's namespaced runtime
// objects to its Gateway, so that Kubernetes' garbage collector deletes
// them with the Gateway. BlockOwnerDeletion is left unset: it would ask
// for the right to update gateways/finalizers, and the provider's destroy
// deletes the runtime itself anyway.
func gatewayOwner(gw *gatewayv1.Gateway) *metav1apply.OwnerReferenceApplyConfiguration {
	return metav1apply.OwnerReference().
		WithAPIVersion(gatewayv1.GroupVersion.String()).
		WithKind("Gateway").
		WithName(gw.Name).
		WithUID(gw.UID).
		WithController(true)
}

// applyRuntime writes the gateway's runtime: ServiceAccount, RBAC (with the
// invalidation endpoint's ClusterRoleBinding, or without it), the VCL
// ConfigMap, Service, Deployment and PodDisruptionBudget. The namespaced
// objects are owned by gw, the Gateway as stored (gatewayOwner); the
// backends' ClusterRole cannot be (a namespaced object cannot own a
// cluster-scoped one), and deleteRuntime deletes it.
func (c *clients) applyRuntime(ctx context.Context, s *gwruntime.Spec, gw *gatewayv1.Gateway) error {
	ns, name := s.Gateway.Namespace, s.Name()
	lbl, ann := s.ObjectLabels(), s.ObjectAnnotations()
	opts := applyOptions()
	owner := gatewayOwner(gw)

	if _, err := c.Kube.CoreV1().ServiceAccounts(ns).Apply(ctx,
		corev1apply.ServiceAccount(name, ns).WithLabels(lbl).WithAnnotations(ann).WithOwnerReferences(owner).WithAutomountServiceAccountToken(true), opts); err != nil {
		return fmt.Errorf("apply ServiceAccount %s/%s: %w", ns, name, err)
	}
	if err := c.applyGatewayRole(ctx, s, owner); err != nil {
		return err
	}
	rb := rbacv1apply.RoleBinding(name, ns).WithLabels(lbl).WithAnnotations(ann).WithOwnerReferences(owner).
		WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(name)).
		WithSubjects(rbacv1apply.Subject().WithKind("ServiceAccount").WithName(name).WithNamespace(ns))
	if _, err := c.Kube.RbacV1().RoleBindings(ns).Apply(ctx, rb, opts); err != nil {
		return fmt.Errorf("apply RoleBinding %s/%s: %w", ns, name, err)
	}
	cr := rbacv1apply.ClusterRole(gwruntime.BackendClusterRoleName(s.Gateway)).WithLabels(lbl).WithAnnotations(ann).WithRules(gwruntime.PolicyRulesApply(gwruntime.BackendRules())...)
	if _, err := c.Kube.RbacV1().ClusterRoles().Apply(ctx, cr, opts); err != nil {
		return fmt.Errorf("apply ClusterRole %s: %w", gwruntime.BackendClusterRoleName(s.Gateway), err)
	}

	if err := c.applyCertificateRoles(ctx, s); err != nil {
		return err
	}
	if err := c.applyListenerSetStatusRoles(ctx, s); err != nil {
		return err
	}
	if err := c.applyInvalidateAuthBinding(ctx, s); err != nil {
		return err
	}

	// The digest first: the pods load only the main.vcl it names.
	if err := c.recordVCLDigest(ctx, gw, s.MainVCLDigest()); err != nil {
		return err
	}
	data := map[string]string{gwruntime.VCLDataKey: s.MainVCL(), gwruntime.BootVCLKey: varnishd.BootVCL}
	if s.GatewayVCL != nil {
		data[gwruntime.GatewayVCLKey] = *s.GatewayVCL
	}
	vclName := gwruntime.VCLConfigMapName(s.Gateway)
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Apply(ctx, corev1apply.ConfigMap(vclName, ns).WithLabels(lbl).WithAnnotations(ann).WithOwnerReferences(owner).WithData(data), opts); err != nil {
		return fmt.Errorf("apply the VCL ConfigMap %s/%s: %w", ns, vclName, err)
	}

	svc := corev1apply.ServiceSpec().WithType(s.ServiceType).WithSelector(gwruntime.Labels(s.Gateway))
	if s.ExternalTrafficPolicy != "" {
		svc.WithExternalTrafficPolicy(s.ExternalTrafficPolicy)
	}
	for _, p := range s.Ports {
		svc.WithPorts(corev1apply.ServicePort().WithName(routing.SocketName(gatewayv1.PortNumber(p))).
			WithProtocol(corev1.ProtocolTCP).WithPort(p).WithTargetPort(intstr.FromInt32(p)))
	}
	svcAC := corev1apply.Service(name, ns).WithLabels(lbl).WithAnnotations(ann).WithAnnotations(s.ServiceAnnotations).WithOwnerReferences(owner).WithSpec(svc)
	if _, err := c.Kube.CoreV1().Services(ns).Apply(ctx, svcAC, opts); err != nil {
		return fmt.Errorf("apply Service %s/%s: %w", ns, name, err)
	}

	if err := c.ensureAdminSecret(ctx, s, owner); err != nil {
		return err
	}
	if _, err := c.Kube.AppsV1().Deployments(ns).Apply(ctx, s.Deployment().WithOwnerReferences(owner), opts); err != nil {
		return fmt.Errorf("apply Deployment %s/%s: %w", ns, name, err)
	}

	pdb := policyv1apply.PodDisruptionBudget(name, ns).WithLabels(lbl).WithAnnotations(ann).WithOwnerReferences(owner).WithSpec(policyv1apply.PodDisruptionBudgetSpec().
		WithMaxUnavailable(s.MaxUnavailable).
		WithSelector(metav1apply.LabelSelector().WithMatchLabels(gwruntime.Labels(s.Gateway))))
	if _, err := c.Kube.PolicyV1().PodDisruptionBudgets(ns).Apply(ctx, pdb, opts); err != nil {
		return fmt.Errorf("apply PodDisruptionBudget %s/%s: %w", ns, name, err)
	}
	return nil
}

// vclDigestFieldManager owns the Gateway's gwruntime.VCLDigestAnnotation,
// apart from the Gateway's spec, which the provider's apply of the spec
// would otherwise have to carry.
const vclDigestFieldManager = status.VCLDigestManager

// recordVCLDigest writes the digest of the main.vcl the provider rendered
// as the Gateway's gwruntime.VCLDigestAnnotation, unless gw (as stored)
// has it already.
func (c *clients) recordVCLDigest(ctx context.Context, gw *gatewayv1.Gateway, digest string) error {
	if gw.Annotations[gwruntime.VCLDigestAnnotation] == digest {
		return nil
	}
	ac := gatewayv1apply.Gateway(gw.Name, gw.Namespace).WithAnnotations(map[string]string{gwruntime.VCLDigestAnnotation: digest})
	if _, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: vclDigestFieldManager, Force: true}); err != nil {
		return fmt.Errorf("record the main VCL's digest on Gateway %s/%s (annotation %s): %w", gw.Namespace, gw.Name, gwruntime.VCLDigestAnnotation, err)
	}
	return nil
}

// applyGatewayRole applies the pods' Role in the Gateway's namespace
// (gatewayRules).
func (c *clients) applyGatewayRole(ctx context.Context, s *gwruntime.Spec, owner *metav1apply.OwnerReferenceApplyConfiguration) error {
	ns, name := s.Gateway.Namespace, s.Name()
	role := rbacv1apply.Role(name, ns).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).WithOwnerReferences(owner).WithRules(gwruntime.PolicyRulesApply(s.GatewayRules())...)
	if _, err := c.Kube.RbacV1().Roles(ns).Apply(ctx, role, applyOptions()); err != nil {
		return fmt.Errorf("apply Role %s/%s: %w", ns, name, err)
	}
	return nil
}

// applyCertificateAccess applies what lets the pods read exactly the
// certificate Secrets of s: the Role in the Gateway's namespace and the
// certificate Roles elsewhere (applyCertificateRoles), and patch the
// status of exactly the ListenerSets whose HTTPS listeners they serve
// (applyListenerSetStatusRoles). applyRuntime does it too; this is for a
// change that does not roll the pods.
func (c *clients) applyCertificateAccess(ctx context.Context, s *gwruntime.Spec, gw *gatewayv1.Gateway) error {
	if err := c.applyGatewayRole(ctx, s, gatewayOwner(gw)); err != nil {
		return err
	}
	if err := c.applyCertificateRoles(ctx, s); err != nil {
		return err
	}
	return c.applyListenerSetStatusRoles(ctx, s)
}

// applyListenerSetStatusRoles writes, in each namespace that holds
// ListenerSets with an HTTPS listener the pods serve (the Gateway's own
// included), a Role and RoleBinding gwruntime.ListenerSetStatusRoleName
// that let the pods read and patch the status of exactly those
// ListenerSets (gwruntime.ListenerSetStatusRules), and deletes those of
// namespaces that have none any more. Like the certificate Roles they
// carry the gateway's runtime labels, by which they are found.
func (c *clients) applyListenerSetStatusRoles(ctx context.Context, s *gwruntime.Spec) error {
	name, sa := gwruntime.ListenerSetStatusRoleName(s.Gateway), s.Name()
	lbl, ann := s.ObjectLabels(), s.ObjectAnnotations()
	opts := applyOptions()
	want := s.ListenerSetNames()
	for _, ns := range slices.Sorted(maps.Keys(want)) {
		role := rbacv1apply.Role(name, ns).WithLabels(lbl).WithAnnotations(ann).WithRules(gwruntime.PolicyRulesApply(gwruntime.ListenerSetStatusRules(want[ns]))...)
		if _, err := c.Kube.RbacV1().Roles(ns).Apply(ctx, role, opts); err != nil {
			return fmt.Errorf("apply Role %s/%s, which lets the gateway pods keep the ResolvedRefs condition of the ListenerSets' HTTPS listeners current: %w", ns, name, err)
		}
		rb := rbacv1apply.RoleBinding(name, ns).WithLabels(lbl).WithAnnotations(ann).
			WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
			WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(sa).WithNamespace(s.Gateway.Namespace))
		if _, err := c.Kube.RbacV1().RoleBindings(ns).Apply(ctx, rb, opts); err != nil {
			return fmt.Errorf("apply RoleBinding %s/%s: %w", ns, name, err)
		}
	}
	return c.deleteGatewayRoles(ctx, s.Gateway, func(n, ns string) bool { _, ok := want[ns]; return n == name && !ok })
}

// applyCertificateRoles writes, in each other namespace than the
// Gateway's that holds certificate Secrets its HTTPS listeners reference,
// a Role and RoleBinding gwruntime.CertificateRoleName that let the pods
// read exactly those Secrets (and the ReferenceGrants there, which decide
// whether they may use them), and deletes those of namespaces no listener
// references any more. A namespaced object cannot be owned by an object
// of another namespace: they carry the gateway's runtime labels instead,
// by which they are found and deleted.
func (c *clients) applyCertificateRoles(ctx context.Context, s *gwruntime.Spec) error {
	name, sa := gwruntime.CertificateRoleName(s.Gateway), s.Name()
	lbl, ann := s.ObjectLabels(), s.ObjectAnnotations()
	opts := applyOptions()
	want := s.CertificateSecretNames()
	delete(want, s.Gateway.Namespace)
	for _, ns := range slices.Sorted(maps.Keys(want)) {
		role := rbacv1apply.Role(name, ns).WithLabels(lbl).WithAnnotations(ann).WithRules(gwruntime.PolicyRulesApply(gwruntime.CertificateRules(want[ns], true))...)
		if _, err := c.Kube.RbacV1().Roles(ns).Apply(ctx, role, opts); err != nil {
			hint := ""
			if apierrors.IsForbidden(err) {
				hint = fmt.Sprintf("; the provider needs the ClusterRole %s bound in namespace %s too (docs/guides/security.md)", ProviderNamespaceRoleName, ns)
			}
			return fmt.Errorf("apply Role %s/%s, which lets the gateway pods read their certificate Secrets there: %w%s", ns, name, err, hint)
		}
		rb := rbacv1apply.RoleBinding(name, ns).WithLabels(lbl).WithAnnotations(ann).
			WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
			WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(sa).WithNamespace(s.Gateway.Namespace))
		if _, err := c.Kube.RbacV1().RoleBindings(ns).Apply(ctx, rb, opts); err != nil {
			return fmt.Errorf("apply RoleBinding %s/%s: %w", ns, name, err)
		}
	}
	return c.deleteCertificateRoles(ctx, s.Gateway, want)
}

// deleteCertificateRoles deletes the gateway's certificate Roles and
// RoleBindings (applyCertificateRoles) in the namespaces not in keep.
func (c *clients) deleteCertificateRoles(ctx context.Context, gw routing.ObjectRef, keep map[string][]string) error {
	current := gwruntime.CertificateRoleName(gw)
	return c.deleteGatewayRoles(ctx, gw, func(name, ns string) bool {
		if ns == gw.Namespace {
			return false // there, the gateway's own Role grants the Secrets
		}
		_, kept := keep[ns]
		return name == current && !kept
	})
}

// deleteGatewayRoles deletes the gateway's Roles and RoleBindings, found
// by the gateway's runtime labels, whose name and namespace drop accepts.
func (c *clients) deleteGatewayRoles(ctx context.Context, gw routing.ObjectRef, drop func(name, ns string) bool) error {
	sel := metav1.FormatLabelSelector(metav1.SetAsLabelSelector(gwruntime.RuntimeLabels(gw)))
	rbs, err := c.Kube.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list the RoleBindings of gateway %s: %w", gw, err)
	}
	for _, rb := range rbs.Items {
		name := rb.Name
		if !drop(name, rb.Namespace) {
			continue
		}
		if err := c.Kube.RbacV1().RoleBindings(rb.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rb.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete RoleBinding %s/%s: %w", rb.Namespace, name, err)
		}
		role, err := c.Kube.RbacV1().Roles(rb.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get Role %s/%s: %w", rb.Namespace, name, err)
		}
		if !hasMetadata(role, gwruntime.RuntimeLabels(gw), nil) {
			continue // not ours
		}
		if err := c.Kube.RbacV1().Roles(rb.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &role.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Role %s/%s: %w", rb.Namespace, name, err)
		}
	}
	return nil
}

// ensureAdminSecret creates, in sidecar mode, the Secret with the admin
// secret of varnishd (32 random bytes, hex encoded) unless it exists: it is
// not rewritten, so applies do not roll the pods. In supervise mode the
// chaperone makes a secret of its own and the Secret is not needed.
func (c *clients) ensureAdminSecret(ctx context.Context, s *gwruntime.Spec, owner *metav1apply.OwnerReferenceApplyConfiguration) error {
	ns, name := s.Gateway.Namespace, gwruntime.AdminSecretName(s.Gateway)
	if s.Mode != gwruntime.ModeSidecar {
		old, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || old.Labels[gwruntime.NamespaceLabel] != ns || old.Labels["app.kubernetes.io/managed-by"] != managedLabels["app.kubernetes.io/managed-by"] {
			return nil // none, or not ours
		}
		err = c.Kube.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Secret %s/%s, which supervise mode does not use: %w", ns, name, err)
		}
		return nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return fmt.Errorf("make the varnishd admin secret: %w", err)
	}
	// Created once with the runtime labels, then its labels and annotations
	// are applied: an apply of the metadata alone leaves the data, which
	// the create wrote, alone, and drops infrastructure labels that are
	// gone.
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: gwruntime.RuntimeLabels(s.Gateway)},
		Data:       map[string][]byte{gwruntime.SecretKey: []byte(hex.EncodeToString(buf) + "\n")},
	}
	if _, err := c.Kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{FieldManager: FieldManager}); apierrors.IsAlreadyExists(err) {
		old, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get Secret %s/%s: %w", ns, name, err)
		}
		if old.Labels[gwruntime.NamespaceLabel] != ns || old.Labels["app.kubernetes.io/managed-by"] != managedLabels["app.kubernetes.io/managed-by"] {
			return nil // not ours: used as it is
		}
	} else if err != nil {
		return fmt.Errorf("create Secret %s/%s with the varnishd admin secret: %w", ns, name, err)
	}
	ac := corev1apply.Secret(name, ns).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).WithOwnerReferences(owner)
	if _, err := c.Kube.CoreV1().Secrets(ns).Apply(ctx, ac, applyOptions()); err != nil {
		return fmt.Errorf("apply the labels and annotations of Secret %s/%s: %w", ns, name, err)
	}
	return nil
}

// hasMetadata reports whether o carries every label and annotation given.
func hasMetadata(o metav1.Object, labels, annotations map[string]string) bool {
	for k, v := range labels {
		if got, ok := o.GetLabels()[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range annotations {
		if got, ok := o.GetAnnotations()[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// rolledOut reports whether d has rolled out its current template, as
// kubectl rollout status decides it.
func rolledOut(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return false, "the Deployment controller has not observed the latest spec"
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < st.UpdatedReplicas:
		return false, fmt.Sprintf("%d of %d updated replicas available", st.AvailableReplicas, st.UpdatedReplicas)
	}
	return true, ""
}

// serviceAddresses are the Service's addresses: the LoadBalancer ingress
// IPs and hostnames, or else its cluster IPs.
func serviceAddresses(svc *corev1.Service) []gatewayv1.GatewayStatusAddress {
	var out []gatewayv1.GatewayStatusAddress
	ip, host := gatewayv1.IPAddressType, gatewayv1.HostnameAddressType
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: &ip, Value: in.IP})
		} else if in.Hostname != "" {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: &host, Value: in.Hostname})
		}
	}
	if len(out) > 0 {
		return out
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, a := range ips {
		if a != corev1.ClusterIPNone {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: &ip, Value: a})
		}
	}
	return out
}

// attachedRoutes counts the accepted routes per listener of gw from its
// RoutingFragments (the ones the gateway pods accept); every listener of gw
// has an entry.
func (c *clients) attachedRoutes(ctx context.Context, gw *gatewayv1.Gateway) (map[string]int32, error) {
	frags, _, err := c.gatewayFragments(ctx, routing.ObjectRef{Namespace: gw.Namespace, Name: gw.Name})
	if err != nil {
		return nil, err
	}
	counts := routing.ListenerAttachedRoutes(frags)
	out := map[string]int32{}
	for _, l := range gw.Spec.Listeners {
		out[string(l.Name)] = counts[string(l.Name)]
	}
	return out, nil
}

// writeGatewayStatus sets the provider's part of the Gateway status with
// field manager FieldManager: Accepted, the listeners (supported kinds,
// Accepted, and ResolvedRefs of the HTTP listeners: the gateway pods write
// an HTTPS listener's) and the addresses of svc (none when nil). With
// invalidParams the Gateway is not accepted (reason InvalidParameters, the
// error as message). The chaperone's Programmed condition (another field
// manager) is left alone.
//
// A listener's attachedRoutes is the gateway pods' (they follow every
// route change) once they write it: while a pod owns it
// (podsCountRoutes), the provider's apply repeats the value the entry has,
// so that it neither changes nor, by leaving out a field it owned,
// deletes it; before (a new listener, no pod running yet, pods of a
// release that did not count), it is the count of the listener's
// RoutingFragments now. Entries of listeners the Gateway no longer
// has are removed first, whoever wrote their fields. The apply carries the
// resource version it read, and is made again on a conflict.
func (c *clients) writeGatewayStatus(ctx context.Context, gw *gatewayv1.Gateway, svc *corev1.Service, invalidParams error) error {
	ns, name := gw.Namespace, gw.Name
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			if gw, err = c.Gateway.GatewayV1().Gateways(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("read Gateway %s/%s: %w", ns, name, err)
			}
		}
		if gw, err = c.removeStaleListenerStatus(ctx, gw); err == nil {
			err = c.applyGatewayStatus(ctx, gw, svc, invalidParams)
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// removeStaleListenerStatus removes the status entries of listeners gw's
// spec no longer has, with a JSON patch that tests the resource version
// (a server-side apply could only drop the provider's own fields of such
// an entry: the gateway pods' attachedRoutes or ResolvedRefs would be left
// as an entry without its required fields, which the API server refuses).
func (c *clients) removeStaleListenerStatus(ctx context.Context, gw *gatewayv1.Gateway) (*gatewayv1.Gateway, error) {
	inSpec := map[gatewayv1.SectionName]bool{}
	for _, l := range gw.Spec.Listeners {
		inSpec[l.Name] = true
	}
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": gw.ResourceVersion}}
	for i := len(gw.Status.Listeners) - 1; i >= 0; i-- {
		if !inSpec[gw.Status.Listeners[i].Name] {
			ops = append(ops, map[string]any{"op": "remove", "path": fmt.Sprintf("/status/listeners/%d", i)})
		}
	}
	if len(ops) == 1 {
		return gw, nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode the removal of old listener status of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	out, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).Patch(ctx, gw.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if err != nil {
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "/metadata/resourceVersion") {
			// The resource version changed since the read: read again.
			return nil, apierrors.NewConflict(gatewayv1.Resource("gateways"), gw.Name, err)
		}
		return nil, fmt.Errorf("remove the status of removed listeners of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	return out, nil
}

// podsCountRoutes reports whether the gateway pods' field manager
// (gwruntime.RoutesFieldManager) owns the attachedRoutes of gw's listener
// entry named listener.
func podsCountRoutes(gw *gatewayv1.Gateway, listener gatewayv1.SectionName) bool {
	key, err := json.Marshal(map[string]string{"name": string(listener)})
	if err != nil {
		return false
	}
	for _, mf := range gw.ManagedFields {
		if mf.Manager != gwruntime.RoutesFieldManager || mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Status struct {
				Listeners map[string]map[string]json.RawMessage `json:"f:listeners"`
			} `json:"f:status"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if _, ok := fields.Status.Listeners["k:"+string(key)]["f:attachedRoutes"]; ok {
			return true
		}
	}
	return false
}

func (c *clients) applyGatewayStatus(ctx context.Context, gw *gatewayv1.Gateway, svc *corev1.Service, invalidParams error) error {
	var attached map[string]int32
	accepted := metav1.Condition{Type: string(gatewayv1.GatewayConditionAccepted), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.GatewayReasonAccepted), Message: "Accepted by the varnishgw provider.", ObservedGeneration: gw.Generation}
	if invalidParams != nil {
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(gatewayv1.GatewayReasonInvalidParameters), invalidParams.Error()
	}
	st := gatewayv1apply.GatewayStatus().WithConditions(status.Condition(gw.Status.Conditions, accepted))
	if svc != nil {
		for _, a := range serviceAddresses(svc) {
			st.WithAddresses(gatewayv1apply.GatewayStatusAddress().WithType(*a.Type).WithValue(a.Value))
		}
	}
	for _, l := range gw.Spec.Listeners {
		var live *gatewayv1.ListenerStatus
		for i := range gw.Status.Listeners {
			if gw.Status.Listeners[i].Name == l.Name {
				live = &gw.Status.Listeners[i]
			}
		}
		var old []metav1.Condition
		var routes int32
		if live != nil {
			old = live.Conditions
		}
		if live != nil && podsCountRoutes(gw, l.Name) {
			routes = live.AttachedRoutes
		} else {
			if attached == nil {
				var err error
				if attached, err = c.attachedRoutes(ctx, gw); err != nil {
					return err
				}
			}
			routes = attached[string(l.Name)]
		}
		ls := gatewayv1apply.ListenerStatus().
			WithName(l.Name).
			WithSupportedKinds(gatewayv1apply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
			WithAttachedRoutes(routes).
			WithConditions(status.Condition(old, metav1.Condition{Type: string(gatewayv1.ListenerConditionAccepted), Status: metav1.ConditionTrue,
				Reason: string(gatewayv1.ListenerReasonAccepted), Message: "Served on varnishd socket " + routing.SocketName(l.Port) + ".", ObservedGeneration: gw.Generation}))
		// An HTTPS listener's ResolvedRefs says whether its certificates
		// resolve, which the gateway pods find out (they read the Secrets
		// and ReferenceGrants): they are its one writer. The provider does
		// not apply it, so that its apply neither overwrites nor, as a
		// server-side apply that leaves out a field it owned, deletes it.
		if l.Protocol != gatewayv1.HTTPSProtocolType {
			ls.WithConditions(status.Condition(old, metav1.Condition{Type: string(gatewayv1.ListenerConditionResolvedRefs), Status: metav1.ConditionTrue,
				Reason: string(gatewayv1.ListenerReasonResolvedRefs), Message: "Listener references resolved.", ObservedGeneration: gw.Generation}))
		}
		st.WithListeners(ls)
	}
	// attachedListenerSets: the ListenerSets it admits with a listener
	// served.
	if gw.Spec.AllowedListeners != nil {
		cg, err := c.composeGateway(ctx, gw, nil)
		if err != nil {
			return err
		}
		st.WithAttachedListenerSets(cg.AttachedListenerSets())
	}
	ac := gatewayv1apply.Gateway(gw.Name, gw.Namespace).WithResourceVersion(gw.ResourceVersion).WithStatus(st)
	if _, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).ApplyStatus(ctx, ac, applyOptions()); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("set the status of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	return nil
}

// deleteRuntime deletes every object the gateway resource created, each
// only if it carries the gateway's runtime labels (never an object of the
// same name that someone else made).
func (c *clients) deleteRuntime(ctx context.Context, gw routing.ObjectRef) error {
	ns, name := gw.Namespace, gwruntime.Name(gw)
	want := gwruntime.RuntimeLabels(gw)
	ours := func(o metav1.Object) bool {
		for k, v := range want {
			if o.GetLabels()[k] != v {
				return false
			}
		}
		return true
	}
	type target struct {
		what string
		get  func() (metav1.Object, error)
		del  func(metav1.DeleteOptions) error
	}
	targets := []target{
		{"Deployment " + ns + "/" + name,
			func() (metav1.Object, error) {
				return c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error { return c.Kube.AppsV1().Deployments(ns).Delete(ctx, name, o) }},
		{"PodDisruptionBudget " + ns + "/" + name,
			func() (metav1.Object, error) {
				return c.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error {
				return c.Kube.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, name, o)
			}},
		{"Service " + ns + "/" + name,
			func() (metav1.Object, error) { return c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}) },
			func(o metav1.DeleteOptions) error { return c.Kube.CoreV1().Services(ns).Delete(ctx, name, o) }},
		{"ConfigMap " + ns + "/" + gwruntime.VCLConfigMapName(gw),
			func() (metav1.Object, error) {
				return c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error {
				return c.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, gwruntime.VCLConfigMapName(gw), o)
			}},
		{"RoleBinding " + ns + "/" + name,
			func() (metav1.Object, error) {
				return c.Kube.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error { return c.Kube.RbacV1().RoleBindings(ns).Delete(ctx, name, o) }},
		{"Role " + ns + "/" + name,
			func() (metav1.Object, error) { return c.Kube.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{}) },
			func(o metav1.DeleteOptions) error { return c.Kube.RbacV1().Roles(ns).Delete(ctx, name, o) }},
		{"ClusterRole " + gwruntime.BackendClusterRoleName(gw),
			func() (metav1.Object, error) {
				return c.Kube.RbacV1().ClusterRoles().Get(ctx, gwruntime.BackendClusterRoleName(gw), metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error {
				return c.Kube.RbacV1().ClusterRoles().Delete(ctx, gwruntime.BackendClusterRoleName(gw), o)
			}},
		{"Secret " + ns + "/" + gwruntime.AdminSecretName(gw),
			func() (metav1.Object, error) {
				return c.Kube.CoreV1().Secrets(ns).Get(ctx, gwruntime.AdminSecretName(gw), metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error {
				return c.Kube.CoreV1().Secrets(ns).Delete(ctx, gwruntime.AdminSecretName(gw), o)
			}},
		{"ServiceAccount " + ns + "/" + name,
			func() (metav1.Object, error) {
				return c.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error { return c.Kube.CoreV1().ServiceAccounts(ns).Delete(ctx, name, o) }},
	}
	if err := c.deleteCertificateRoles(ctx, gw, nil); err != nil {
		return err
	}
	if err := c.deleteGatewayRoles(ctx, gw, func(n, _ string) bool { return n == gwruntime.ListenerSetStatusRoleName(gw) }); err != nil {
		return err
	}
	if err := c.deleteInvalidateAuthBinding(ctx, gw); err != nil {
		return err
	}
	for _, t := range targets {
		o, err := t.get()
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", t.what, err)
		}
		if !ours(o) {
			continue
		}
		uid := o.GetUID()
		bg := metav1.DeletePropagationBackground
		if err := t.del(metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", t.what, err)
		}
	}
	return nil
}

// parseResources turns a map of resource names to quantities into a
// ResourceList, naming the attribute in errors.
func parseResources(attr string, m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		q, err := resource.ParseQuantity(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s[%q] = %q is not a Kubernetes quantity (%v); use for example \"500m\" for CPU or \"256Mi\" for memory", attr, k, m[k], err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}
