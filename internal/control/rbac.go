package control

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// applyGatewayRole applies the pods' Role in the Gateway's namespace
// (gatewayRules).
func (c *Cluster) applyGatewayRole(ctx context.Context, s *gwruntime.Spec, owner *metav1apply.OwnerReferenceApplyConfiguration) error {
	ns, name := s.Gateway.Namespace, s.Name()
	if _, err := c.Kube.RbacV1().Roles(ns).Apply(ctx, s.Role().WithOwnerReferences(owner), ApplyOptions()); err != nil {
		return fmt.Errorf("apply Role %s/%s: %w", ns, name, err)
	}
	return nil
}

// ApplyCertificateAccess applies what lets the pods read exactly the
// certificate Secrets of s: the Role in the Gateway's namespace and the
// certificate Roles elsewhere (applyCertificateRoles), and patch the
// status of exactly the ListenerSets whose HTTPS listeners they serve
// (applyListenerSetStatusRoles). applyRuntime does it too; this is for a
// change that does not roll the pods.
func (c *Cluster) ApplyCertificateAccess(ctx context.Context, s *gwruntime.Spec, gw *gatewayv1.Gateway) error {
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
func (c *Cluster) applyListenerSetStatusRoles(ctx context.Context, s *gwruntime.Spec) error {
	name := gwruntime.ListenerSetStatusRoleName(s.Gateway)
	opts := ApplyOptions()
	want := s.ListenerSetNames()
	for _, ns := range slices.Sorted(maps.Keys(want)) {
		role, rb := s.NamespaceRole(ns, name, gwruntime.ListenerSetStatusRules(want[ns]))
		if _, err := c.Kube.RbacV1().Roles(ns).Apply(ctx, role, opts); err != nil {
			return fmt.Errorf("apply Role %s/%s, which lets the gateway pods keep the ResolvedRefs condition of the ListenerSets' HTTPS listeners current: %w", ns, name, err)
		}
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
func (c *Cluster) applyCertificateRoles(ctx context.Context, s *gwruntime.Spec) error {
	name := gwruntime.CertificateRoleName(s.Gateway)
	opts := ApplyOptions()
	want := s.CertificateSecretNames()
	delete(want, s.Gateway.Namespace)
	for _, ns := range slices.Sorted(maps.Keys(want)) {
		role, rb := s.NamespaceRole(ns, name, gwruntime.CertificateRules(want[ns], true))
		if _, err := c.Kube.RbacV1().Roles(ns).Apply(ctx, role, opts); err != nil {
			hint := ""
			if apierrors.IsForbidden(err) {
				hint = fmt.Sprintf("; the provider needs the ClusterRole %s bound in namespace %s too (docs/guides/security.md)", ProviderNamespaceRoleName, ns)
			}
			return fmt.Errorf("apply Role %s/%s, which lets the gateway pods read their certificate Secrets there: %w%s", ns, name, err, hint)
		}
		if _, err := c.Kube.RbacV1().RoleBindings(ns).Apply(ctx, rb, opts); err != nil {
			return fmt.Errorf("apply RoleBinding %s/%s: %w", ns, name, err)
		}
	}
	return c.deleteCertificateRoles(ctx, s.Gateway, want)
}

// deleteCertificateRoles deletes the gateway's certificate Roles and
// RoleBindings (applyCertificateRoles) in the namespaces not in keep.
func (c *Cluster) deleteCertificateRoles(ctx context.Context, gw object.Ref, keep map[string][]string) error {
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
func (c *Cluster) deleteGatewayRoles(ctx context.Context, gw object.Ref, drop func(name, ns string) bool) error {
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

// applyInvalidateAuthBinding writes, when the pods serve the invalidation
// endpoint, the ClusterRoleBinding gwruntime.InvalidateAuthBindingName of
// their ServiceAccount to system:auth-delegator; otherwise it deletes the
// gateway's one, if any. A cluster-scoped object cannot be owned by the
// Gateway: it carries the gateway's runtime labels, by which deleteRuntime
// knows it.
func (c *Cluster) applyInvalidateAuthBinding(ctx context.Context, s *gwruntime.Spec) error {
	if s.InvalidatePort == 0 {
		return c.deleteInvalidateAuthBinding(ctx, s.Gateway)
	}
	name := gwruntime.InvalidateAuthBindingName(s.Gateway)
	crb := rbacv1apply.ClusterRoleBinding(name).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).
		WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(gwruntime.AuthDelegatorClusterRole)).
		WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(s.Name()).WithNamespace(s.Gateway.Namespace))
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Apply(ctx, crb, ApplyOptions()); err != nil {
		hint := ""
		if apierrors.IsForbidden(err) {
			hint = fmt.Sprintf("; the provider needs the rights of the ClusterRole %s of docs/guides/security.md: clusterrolebindings "+
				"get, create, patch and delete, and bind of the ClusterRole %s", ProviderClusterRoleName, gwruntime.AuthDelegatorClusterRole)
		}
		return fmt.Errorf("apply ClusterRoleBinding %s, which lets the gateway pods check the callers of their invalidation endpoint: %w%s", name, err, hint)
	}
	return nil
}

// deleteInvalidateAuthBinding deletes the gateway's ClusterRoleBinding to
// system:auth-delegator if there is one and it is the gateway's (carries
// its runtime labels). An identity that may not read ClusterRoleBindings
// (the provider's role of releases before the endpoint) cannot have
// written one: that is no error, so gateways without the endpoint need no
// new rights.
func (c *Cluster) deleteInvalidateAuthBinding(ctx context.Context, gw object.Ref) error {
	name := gwruntime.InvalidateAuthBindingName(gw)
	crb, err := c.Kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ClusterRoleBinding %s: %w", name, err)
	}
	if !hasMetadata(crb, gwruntime.RuntimeLabels(gw), nil) {
		return nil // not ours
	}
	err = c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &crb.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ClusterRoleBinding %s: %w", name, err)
	}
	return nil
}

// invalidateAuthBindingDrift says what differs between the gateway's
// ClusterRoleBinding to system:auth-delegator and what s asks for: missing,
// bound to another role or subject, relabelled, or present although the
// endpoint is off. Empty when it is as it should be.
func (c *Cluster) invalidateAuthBindingDrift(ctx context.Context, s *gwruntime.Spec) (string, error) {
	name := gwruntime.InvalidateAuthBindingName(s.Gateway)
	what := "ClusterRoleBinding " + name
	crb, err := c.Kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	switch {
	case (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) && s.InvalidatePort == 0:
		// Forbidden: see deleteInvalidateAuthBinding.
		return "", nil
	case apierrors.IsNotFound(err):
		return what + " is missing", nil
	case err != nil:
		return "", fmt.Errorf("get %s: %w", what, err)
	case s.InvalidatePort == 0:
		if hasMetadata(crb, gwruntime.RuntimeLabels(s.Gateway), nil) {
			return what + " is left although invalidation_endpoint_port is unset", nil
		}
		return "", nil
	}
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != gwruntime.AuthDelegatorClusterRole || len(crb.Subjects) != 1 ||
		crb.Subjects[0].Kind != rbacv1.ServiceAccountKind || crb.Subjects[0].Name != s.Name() || crb.Subjects[0].Namespace != s.Gateway.Namespace {
		return what + " changed", nil
	}
	if !hasMetadata(crb, s.ObjectLabels(), s.ObjectAnnotations()) {
		return "the labels or annotations of " + what + " changed", nil
	}
	return "", nil
}
