package control

import (
	"context"
	"fmt"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
)

// DryRunDeployment is the gateway's Deployment as the API server would
// store it after the provider's apply (a server-side dry run): defaults
// set, and other field managers' fields kept. An invalid pod template is
// an error the API server words, naming the field.
func (c *Cluster) DryRunDeployment(ctx context.Context, s *gwruntime.Spec) (*appsv1.Deployment, error) {
	opts := ApplyOptions()
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

// ApplyRuntime writes the gateway's runtime: ServiceAccount, RBAC (with the
// invalidation endpoint's ClusterRoleBinding, or without it), the VCL
// ConfigMap, Service, Deployment and PodDisruptionBudget. The namespaced
// objects are owned by gw, the Gateway as stored (gatewayOwner); the
// backends' ClusterRole cannot be (a namespaced object cannot own a
// cluster-scoped one), and deleteRuntime deletes it.
func (c *Cluster) ApplyRuntime(ctx context.Context, s *gwruntime.Spec, gw *gatewayv1.Gateway) error {
	ns, name := s.Gateway.Namespace, s.Name()
	opts := ApplyOptions()
	owner := gatewayOwner(gw)

	if _, err := c.Kube.CoreV1().ServiceAccounts(ns).Apply(ctx, s.ServiceAccount().WithOwnerReferences(owner), opts); err != nil {
		return fmt.Errorf("apply ServiceAccount %s/%s: %w", ns, name, err)
	}
	if err := c.applyGatewayRole(ctx, s, owner); err != nil {
		return err
	}
	if _, err := c.Kube.RbacV1().RoleBindings(ns).Apply(ctx, s.RoleBinding().WithOwnerReferences(owner), opts); err != nil {
		return fmt.Errorf("apply RoleBinding %s/%s: %w", ns, name, err)
	}
	if _, err := c.Kube.RbacV1().ClusterRoles().Apply(ctx, s.BackendClusterRole(), opts); err != nil {
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
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Apply(ctx, s.VCLConfigMap().WithOwnerReferences(owner), opts); err != nil {
		return fmt.Errorf("apply the VCL ConfigMap %s/%s: %w", ns, gwruntime.VCLConfigMapName(s.Gateway), err)
	}
	if _, err := c.Kube.CoreV1().Services(ns).Apply(ctx, s.Service().WithOwnerReferences(owner), opts); err != nil {
		return fmt.Errorf("apply Service %s/%s: %w", ns, name, err)
	}

	if err := c.ensureAdminSecret(ctx, s, owner); err != nil {
		return err
	}
	if _, err := c.Kube.AppsV1().Deployments(ns).Apply(ctx, s.Deployment().WithOwnerReferences(owner), opts); err != nil {
		return fmt.Errorf("apply Deployment %s/%s: %w", ns, name, err)
	}
	if _, err := c.Kube.PolicyV1().PodDisruptionBudgets(ns).Apply(ctx, s.PodDisruptionBudget().WithOwnerReferences(owner), opts); err != nil {
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
func (c *Cluster) recordVCLDigest(ctx context.Context, gw *gatewayv1.Gateway, digest string) error {
	if gw.Annotations[gwruntime.VCLDigestAnnotation] == digest {
		return nil
	}
	ac := gatewayv1apply.Gateway(gw.Name, gw.Namespace).WithAnnotations(map[string]string{gwruntime.VCLDigestAnnotation: digest})
	if _, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: vclDigestFieldManager, Force: true}); err != nil {
		return fmt.Errorf("record the main VCL's digest on Gateway %s/%s (annotation %s): %w", gw.Namespace, gw.Name, gwruntime.VCLDigestAnnotation, err)
	}
	return nil
}

// DeleteRuntime deletes every object the gateway resource created, each
// only if it carries the gateway's runtime labels (never an object of the
// same name that someone else made).
func (c *Cluster) DeleteRuntime(ctx context.Context, gw object.Ref) error {
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
	if err := c.deleteGatewayRoles(ctx, gw, func(n, _ string) bool {
		return n == gwruntime.ListenerSetStatusRoleName(gw) || n == gwruntime.RouteStatusRoleName(gw)
	}); err != nil {
		return err
	}
	c.forgetRouteStatusRoles(gw)
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
