package control

import (
	"context"
	"fmt"
	"slices"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// The Role gwruntime.RouteStatusRoleName(gw) in each namespace that holds
// routes a Gateway serves lists exactly those routes
// (gwruntime.RouteStatusRules), so that the Gateway's pods can keep their
// ResolvedRefs condition current between applies; its RoleBinding binds it
// to the pods' ServiceAccount. The routes of a namespace share the pair,
// so the routes one apply writes in parallel change it together: their
// changes queue per (Gateway, namespace), and one caller at a time writes
// all the queued ones in one update (a group commit). Each update carries
// the Role's resourceVersion, so a concurrent change by another process
// (another Terraform state's routes) is read again and never lost.

// routeRoleKey is one Role: a Gateway's, in one namespace.
type routeRoleKey struct {
	gw object.Ref
	ns string
}

// routeRoles are the queues of changes to the route status Roles of this
// process.
type routeRoles struct {
	mu     sync.Mutex
	queues map[routeRoleKey]*routeRoleQueue
}

// routeRoleQueue is one Role's queue. Only its writer (busy) touches role
// and known.
type routeRoleQueue struct {
	pending []*routeRoleChange
	busy    bool
	known   bool         // role is the Role as last read or written
	role    *rbacv1.Role // nil when known: there is none
	bound   bool         // its RoleBinding was written by this process
}

// routeRoleChange adds a route to the Role, or removes it.
type routeRoleChange struct {
	route string
	add   bool
	done  chan error    // the result, once written
	lead  chan struct{} // this change's caller is to write the queue next
}

// changeRouteStatusRole adds route to (add) or removes it from the route
// status Role of gw in ns, and returns when that is written.
func (c *Cluster) changeRouteStatusRole(ctx context.Context, gw object.Ref, ns, route string, add bool) error {
	key := routeRoleKey{gw, ns}
	ch := &routeRoleChange{route: route, add: add, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	r := &c.routeRoles
	r.mu.Lock()
	if r.queues == nil {
		r.queues = map[routeRoleKey]*routeRoleQueue{}
	}
	q := r.queues[key]
	if q == nil {
		q = &routeRoleQueue{}
		r.queues[key] = q
	}
	q.pending = append(q.pending, ch)
	write := !q.busy
	q.busy = true
	r.mu.Unlock()
	if !write {
		// A queued caller waits for its change, or for its turn to write:
		// it never leaves early, so the turn always finds someone.
		select {
		case err := <-ch.done:
			return err
		case <-ch.lead:
		}
	}
	r.mu.Lock()
	batch := q.pending
	q.pending = nil
	r.mu.Unlock()
	err := c.writeRouteStatusRole(ctx, key, q, batch)
	for _, b := range batch {
		b.done <- err
	}
	r.mu.Lock()
	if len(q.pending) > 0 {
		q.pending[0].lead <- struct{}{}
	} else {
		q.busy = false
	}
	r.mu.Unlock()
	return <-ch.done
}

// forgetRouteStatusRoles drops what this process knows of gw's route
// status Roles, after they were deleted with the gateway.
func (c *Cluster) forgetRouteStatusRoles(gw object.Ref) {
	r := &c.routeRoles
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, q := range r.queues {
		if k.gw == gw && !q.busy {
			delete(r.queues, k)
		}
	}
}

// writeRouteStatusRole applies batch to the Role of key: creates it with
// its RoleBinding for the first route, updates it, or deletes both when no
// route is left. Nothing is written when the batch changes nothing.
func (c *Cluster) writeRouteStatusRole(ctx context.Context, key routeRoleKey, q *routeRoleQueue, batch []*routeRoleChange) error {
	name := gwruntime.RouteStatusRoleName(key.gw)
	roles := c.Kube.RbacV1().Roles(key.ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !q.known {
			role, err := roles.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				role = nil
			case err != nil:
				return fmt.Errorf("get Role %s/%s: %w", key.ns, name, err)
			case !hasMetadata(role, gwruntime.RuntimeLabels(key.gw), nil):
				return fmt.Errorf("role %s/%s exists but was not written by varnishgw for Gateway %s (its labels differ): "+
					"delete or rename it, then apply again", key.ns, name, key.gw)
			}
			q.role, q.known = role, true
		}
		have := routeStatusRoleRoutes(q.role)
		want := slices.Clone(have)
		for _, b := range batch {
			i, found := slices.BinarySearch(want, b.route)
			switch {
			case b.add && !found:
				want = slices.Insert(want, i, b.route)
			case !b.add && found:
				want = slices.Delete(want, i, i+1)
			}
		}
		if len(want) == 0 {
			if q.role == nil {
				return nil
			}
			return c.deleteRouteStatusRole(ctx, key, q)
		}
		if q.role != nil && slices.Equal(have, want) {
			return c.bindRouteStatusRole(ctx, key, q)
		}
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: key.ns, Labels: gwruntime.RuntimeLabels(key.gw)},
			Rules:      gwruntime.RouteStatusRules(want),
		}
		var written *rbacv1.Role
		var err error
		if q.role == nil {
			written, err = roles.Create(ctx, role, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				// Created by another process since it was read: read it
				// again, as after a conflict.
				err = apierrors.NewConflict(rbacv1.Resource("roles"), name, err)
			}
		} else {
			role.ResourceVersion = q.role.ResourceVersion
			role.Labels = q.role.Labels
			role.Annotations = q.role.Annotations
			written, err = roles.Update(ctx, role, metav1.UpdateOptions{FieldManager: FieldManager})
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			q.known = false
			return apierrors.NewConflict(rbacv1.Resource("roles"), name, err)
		}
		if err != nil {
			return fmt.Errorf("write Role %s/%s that lets Gateway %s keep the ResolvedRefs condition of its routes there current: %w", key.ns, name, key.gw, err)
		}
		q.role = written
		return c.bindRouteStatusRole(ctx, key, q)
	})
}

// bindRouteStatusRole applies the RoleBinding of the Role of key, once per
// process: so a binding deleted by hand comes back at the next apply of a
// route there.
func (c *Cluster) bindRouteStatusRole(ctx context.Context, key routeRoleKey, q *routeRoleQueue) error {
	if q.bound {
		return nil
	}
	name := gwruntime.RouteStatusRoleName(key.gw)
	rb := rbacv1apply.RoleBinding(name, key.ns).WithLabels(gwruntime.RuntimeLabels(key.gw)).
		WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
		WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).
			WithName(gwruntime.Name(key.gw)).WithNamespace(key.gw.Namespace))
	if _, err := c.Kube.RbacV1().RoleBindings(key.ns).Apply(ctx, rb, ApplyOptions()); err != nil {
		return fmt.Errorf("apply RoleBinding %s/%s that lets Gateway %s keep the ResolvedRefs condition of its routes there current: %w", key.ns, name, key.gw, err)
	}
	q.bound = true
	return nil
}

// deleteRouteStatusRole deletes the RoleBinding of key and its Role (as
// q last saw it). The binding goes first: when another process adds a
// route in between, the Role's delete fails on its changed
// resourceVersion, and the retry finds the route and binds the Role again.
func (c *Cluster) deleteRouteStatusRole(ctx context.Context, key routeRoleKey, q *routeRoleQueue) error {
	name := gwruntime.RouteStatusRoleName(key.gw)
	q.bound = false
	err := c.Kube.RbacV1().RoleBindings(key.ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete RoleBinding %s/%s: %w", key.ns, name, err)
	}
	rv := q.role.ResourceVersion
	err = c.Kube.RbacV1().Roles(key.ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	switch {
	case apierrors.IsConflict(err):
		q.known = false
		return err
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("delete Role %s/%s: %w", key.ns, name, err)
	}
	q.role = nil
	return nil
}

// routeStatusRoleRoutes are the routes role lists, sorted.
func routeStatusRoleRoutes(role *rbacv1.Role) []string {
	if role == nil {
		return nil
	}
	var names []string
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "httproutes/status") {
			names = append(names, r.ResourceNames...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// WriteRouteStatusRoles lists route in the route status Role of every
// varnishgw parent Gateway that accepts it (one per accepted fragment),
// and removes it from those of the Gateways in stale that no longer do.
func (c *Cluster) WriteRouteStatusRoles(ctx context.Context, route *gatewayv1.HTTPRoute, frags []*routing.Fragment, stale []object.Ref) error {
	want := map[object.Ref]bool{}
	for _, f := range frags {
		if f.Accepted() { // else the Gateway does not serve the route: its pods do not write its status
			want[f.Gateway] = true
		}
	}
	for _, gw := range sortedRefs(want) {
		if err := c.changeRouteStatusRole(ctx, gw, route.Namespace, route.Name, true); err != nil {
			return err
		}
	}
	for _, gw := range stale {
		if want[gw] {
			continue
		}
		if err := c.DeleteRouteStatusRole(ctx, gw, object.Ref{Namespace: route.Namespace, Name: route.Name}); err != nil {
			return err
		}
	}
	return nil
}

// DeleteRouteStatusRole removes route from the route status Role of gw in
// its namespace (deleting the Role when it was the last route).
func (c *Cluster) DeleteRouteStatusRole(ctx context.Context, gw, route object.Ref) error {
	return c.changeRouteStatusRole(ctx, gw, route.Namespace, route.Name, false)
}
