package provider

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// Earlier releases named the RoleBinding a route writes in each backend
// namespace for a Gateway gwruntime.LegacyBackendRoleBindingName, a name
// without the Gateway's namespace: two Gateways of one name in different
// namespaces, both parents of the route, wrote the same binding and the
// last one took the other's subject. This release writes
// gwruntime.BackendRoleBindingName instead, and a route's apply or destroy
// deletes the route's bindings of the old name after it has written those
// of the new one, so that the pods never lack a right in between.

// legacyBackendBindings are the backend RoleBindings (label
// backendBindingLabel) found the first time a route prunes its bindings in
// this provider process, by name: one cluster-wide LIST instead of one per
// route and Gateway. This release writes no binding of a legacy name, so
// those only go away.
type legacyBackendBindings struct {
	mu     sync.Mutex
	listed bool
	byName map[string][]legacyBinding
}

// legacyBinding is one RoleBinding that legacyBackendBindings found.
type legacyBinding struct {
	namespace string
	route     string // its fragmentRouteAnnotation
	gatewayNS string // its gwruntime.NamespaceLabel: the namespace of the Gateway it binds
	roleRef   string // the ClusterRole it binds
	uid       types.UID
}

// lookup returns the backend RoleBindings named name, listing them all the
// first time.
func (l *legacyBackendBindings) lookup(ctx context.Context, c *clients, name string) ([]legacyBinding, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.listed {
		list, err := c.kube.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{LabelSelector: backendBindingLabel + "=true"})
		if err != nil {
			return nil, fmt.Errorf("list the backend RoleBindings to find those an earlier release named without the Gateway's namespace: %w", err)
		}
		l.byName = map[string][]legacyBinding{}
		for _, rb := range list.Items {
			l.byName[rb.Name] = append(l.byName[rb.Name], legacyBinding{namespace: rb.Namespace, route: rb.Annotations[fragmentRouteAnnotation],
				gatewayNS: rb.Labels[gwruntime.NamespaceLabel], roleRef: rb.RoleRef.Name, uid: rb.UID})
		}
		l.listed = true
	}
	return l.byName[name], nil
}

// forget records that the RoleBinding namespace/name is gone.
func (l *legacyBackendBindings) forget(namespace, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := l.byName[name][:0]
	for _, b := range l.byName[name] {
		if b.namespace != namespace {
			kept = append(kept, b)
		}
	}
	l.byName[name] = kept
}

// pruneLegacyBackendBindings deletes, in every namespace, the backend
// RoleBindings an earlier release wrote for route and gw under
// gwruntime.LegacyBackendRoleBindingName (those annotated with the route;
// one may hold the subject of another Gateway of gw's name, also a parent
// of the route). Call it only once the route's bindings of this release
// are written for every Gateway that serves the route. An old binding
// references the backend ClusterRole of the old name of the Gateway it
// binds: in a namespace of keep (where the pods still need the right) it
// stays while that ClusterRole exists and the one of the new name, which
// the new binding references, does not (the Gateway not yet applied with
// this release). Once the old bindings are gone, the old ClusterRole goes
// too if no other binding references it.
func (c *clients) pruneLegacyBackendBindings(ctx context.Context, gw, route routing.ObjectRef, keep map[string]bool) error {
	name := gwruntime.LegacyBackendRoleBindingName(gw, route)
	found, err := c.legacyBindings.lookup(ctx, c, name)
	if err != nil {
		return err
	}
	exists := map[string]bool{} // ClusterRoles looked up, by name
	clusterRoleExists := func(name string) (bool, error) {
		if e, ok := exists[name]; ok {
			return e, nil
		}
		_, err := c.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("get ClusterRole %s: %w", name, err)
		}
		exists[name] = err == nil
		return err == nil, nil
	}
	var pruned []routing.ObjectRef // the Gateways whose old bindings went
	for _, b := range found {
		if b.route != route.String() {
			continue // another route's, or not the provider's
		}
		bound := routing.ObjectRef{Namespace: b.gatewayNS, Name: gw.Name} // the old name holds the Gateway's name, not its namespace
		if bound.Namespace == "" {
			bound.Namespace = gw.Namespace
		}
		if keep[b.namespace] {
			old, err := clusterRoleExists(b.roleRef)
			if err != nil {
				return err
			}
			current, err := clusterRoleExists(gwruntime.BackendClusterRoleName(bound))
			if err != nil {
				return err
			}
			if old && !current {
				continue // the Gateway's next apply writes the new ClusterRole, and the route's apply after it deletes this binding
			}
		}
		err := c.kube.RbacV1().RoleBindings(b.namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &b.uid}})
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			continue // replaced since the list: the next provider run looks again
		default:
			return fmt.Errorf("delete RoleBinding %s/%s, which an earlier release wrote for Gateway %s: %w", b.namespace, name, gw, err)
		}
		c.legacyBindings.forget(b.namespace, name)
		if !slices.Contains(pruned, bound) {
			pruned = append(pruned, bound)
		}
	}
	for _, bound := range pruned {
		if err := c.deleteLegacyBackendClusterRole(ctx, bound, false); err != nil {
			return err
		}
	}
	return nil
}
