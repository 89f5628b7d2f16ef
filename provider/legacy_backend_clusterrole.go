package provider

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// Earlier releases named a gateway's backend ClusterRole
// gwruntime.LegacyBackendClusterRoleName, the same for the gateways a-b/c
// and a/b-c: the destroy of one deleted the ClusterRole the other's pods
// read their backends with. This release writes
// gwruntime.BackendClusterRoleName instead. A RoleBinding's roleRef cannot
// change, so the backend RoleBindings an earlier release wrote (legacy
// names, gwruntime.LegacyBackendRoleBindingName) keep referencing the old
// ClusterRole until their route's next apply or destroy replaces them with
// bindings of the new names, which reference the new one. The old
// ClusterRole therefore stays while any backend RoleBinding references it,
// and goes at the first apply of the gateway, or of one of its routes,
// that finds none, or at the gateway's destroy.

// deleteLegacyBackendClusterRole deletes gw's backend ClusterRole of the old
// name if the provider wrote it and no backend RoleBinding references it
// any more. It may be shared with another gateway whose name gave the same
// old name, so every backend RoleBinding counts, not only gw's; at the
// gateway's destroy (destroying) those that bind gw's own ServiceAccount do
// not, as its pods are gone.
func (c *clients) deleteLegacyBackendClusterRole(ctx context.Context, gw routing.ObjectRef, destroying bool) error {
	name := gwruntime.LegacyBackendClusterRoleName(gw)
	cr, err := c.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ClusterRole %s, which an earlier release wrote for Gateway %s: %w", name, gw, err)
	}
	for k, v := range managedLabels {
		if cr.Labels[k] != v {
			return nil // not the provider's
		}
	}
	list, err := c.kube.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{LabelSelector: backendBindingLabel + "=true"})
	if err != nil {
		return fmt.Errorf("list the backend RoleBindings to find those that still reference ClusterRole %s, which an earlier release wrote for Gateway %s: %w", name, gw, err)
	}
	for _, rb := range list.Items {
		if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != name {
			continue
		}
		if destroying && bindsOnly(rb, gw) {
			continue
		}
		return nil // still needed
	}
	err = c.kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cr.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete ClusterRole %s, which an earlier release wrote for Gateway %s: %w", name, gw, err)
	}
	return nil
}

// bindsOnly reports whether rb's only subject is gw's ServiceAccount.
func bindsOnly(rb rbacv1.RoleBinding, gw routing.ObjectRef) bool {
	return len(rb.Subjects) == 1 && rb.Subjects[0].Kind == rbacv1.ServiceAccountKind &&
		rb.Subjects[0].Namespace == gw.Namespace && rb.Subjects[0].Name == gwruntime.Name(gw)
}
