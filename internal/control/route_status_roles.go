package control

import (
	"context"
	"fmt"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// statusRoleLabel marks the Roles and RoleBindings a route writes so that
// the chaperone of each Gateway that serves it can keep the route's
// ResolvedRefs condition true between applies.
const statusRoleLabel = "varnishgw.dev/route-status"

// WriteRouteStatusRoles writes, for every varnishgw parent Gateway that accepts
// the route (one per accepted fragment), the Role and RoleBinding
// gwruntime.RouteStatusRoleName in the route's namespace: they give the
// Gateway's ServiceAccount gwruntime.RouteStatusRules on exactly this
// route. It deletes those of the Gateways in stale, and of parents that
// no longer accept the route.
func (c *Cluster) WriteRouteStatusRoles(ctx context.Context, route *gatewayv1.HTTPRoute, frags []*routing.Fragment, stale []object.Ref) error {
	routeRef := object.Ref{Namespace: route.Namespace, Name: route.Name}
	ns := route.Namespace
	want := map[object.Ref]bool{}
	for _, f := range frags {
		if !f.Accepted() {
			continue // the Gateway does not serve the route: its pods do not write its status
		}
		want[f.Gateway] = true
		name := gwruntime.RouteStatusRoleName(f.Gateway, routeRef)
		lbl := gwruntime.GatewayLabels(f.Gateway)
		lbl[gwruntime.NamespaceLabel] = f.Gateway.Namespace
		lbl[statusRoleLabel] = "true"
		for k, v := range gwruntime.ManagedLabels() {
			lbl[k] = v
		}
		ann := map[string]string{fragmentRouteAnnotation: routeRef.String()}
		role := rbacv1apply.Role(name, ns).WithLabels(lbl).WithAnnotations(ann).
			WithRules(gwruntime.PolicyRulesApply(gwruntime.RouteStatusRules(route.Name))...)
		if _, err := c.Kube.RbacV1().Roles(ns).Apply(ctx, role, ApplyOptions()); err != nil {
			return fmt.Errorf("apply Role %s/%s that lets Gateway %s keep the route's ResolvedRefs condition current: %w", ns, name, f.Gateway, err)
		}
		rb := rbacv1apply.RoleBinding(name, ns).WithLabels(lbl).WithAnnotations(ann).
			WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
			WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).
				WithName(gwruntime.Name(f.Gateway)).WithNamespace(f.Gateway.Namespace))
		if _, err := c.Kube.RbacV1().RoleBindings(ns).Apply(ctx, rb, ApplyOptions()); err != nil {
			return fmt.Errorf("apply RoleBinding %s/%s that lets Gateway %s keep the route's ResolvedRefs condition current: %w", ns, name, f.Gateway, err)
		}
	}
	for _, gw := range stale {
		if want[gw] {
			continue
		}
		if err := c.DeleteRouteStatusRole(ctx, gw, routeRef); err != nil {
			return err
		}
	}
	return nil
}

// DeleteRouteStatusRole deletes the Role and RoleBinding of route for gw
// (writeStatusRoles), if they are the ones the route wrote.
func (c *Cluster) DeleteRouteStatusRole(ctx context.Context, gw, route object.Ref) error {
	name := gwruntime.RouteStatusRoleName(gw, route)
	ns := route.Namespace
	rb, err := c.Kube.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get RoleBinding %s/%s: %w", ns, name, err)
	case rb.Annotations[fragmentRouteAnnotation] == route.String() && rb.Labels[statusRoleLabel] == "true":
		err := c.Kube.RbacV1().RoleBindings(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rb.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete RoleBinding %s/%s: %w", ns, name, err)
		}
	}
	role, err := c.Kube.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get Role %s/%s: %w", ns, name, err)
	case role.Annotations[fragmentRouteAnnotation] == route.String() && role.Labels[statusRoleLabel] == "true":
		err := c.Kube.RbacV1().Roles(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &role.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Role %s/%s: %w", ns, name, err)
		}
	}
	return nil
}
