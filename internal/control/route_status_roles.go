package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
// ResolvedRefs condition current between applies, and, while some of
// those routes have backends in their own namespace (the annotation
// localBackendsAnnotation lists them), lets the pods read the backends
// there too (gwruntime.BackendRules): a route needs a backend RoleBinding
// only for the other namespaces its backends live in. Its RoleBinding
// binds it to the pods' ServiceAccount. The routes of a namespace share the pair,
// so the routes one apply writes in parallel change it together: their
// changes queue per (Gateway, namespace), and one caller at a time writes
// all the queued ones in one update (a group commit). Each update carries
// the Role's resourceVersion, so a concurrent change by another process
// (another Terraform state's routes) is read again and never lost.

// localBackendsAnnotation lists, comma-separated, the routes of the Role
// that have backends in its namespace.
const localBackendsAnnotation = "varnishgw.dev/local-backend-routes"

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

// routeRoleChange adds a route to the Role (with local: it has backends
// in the Role's namespace), or removes it.
type routeRoleChange struct {
	route string
	add   bool
	local bool
	done  chan error    // the result, once written
	lead  chan struct{} // this change's caller is to write the queue next
}

// changeRouteStatusRole adds route to (add, with local when it has
// backends in ns) or removes it from the route status Role of gw in ns,
// and returns when that is written.
func (c *Cluster) changeRouteStatusRole(ctx context.Context, gw object.Ref, ns, route string, add, local bool) error {
	key := routeRoleKey{gw, ns}
	ch := &routeRoleChange{route: route, add: add, local: add && local, done: make(chan error, 1), lead: make(chan struct{}, 1)}
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
		have, haveLocal := routeStatusRoleRoutes(q.role)
		want, wantLocal := slices.Clone(have), slices.Clone(haveLocal)
		for _, b := range batch {
			want = setMember(want, b.route, b.add)
			wantLocal = setMember(wantLocal, b.route, b.local)
		}
		if len(want) == 0 {
			if q.role == nil {
				return nil
			}
			return c.deleteRouteStatusRole(ctx, key, q)
		}
		if q.role != nil && slices.Equal(have, want) && slices.Equal(haveLocal, wantLocal) {
			return c.bindRouteStatusRole(ctx, key, q)
		}
		rules := gwruntime.RouteStatusRules(want)
		if len(wantLocal) > 0 {
			rules = append(rules, gwruntime.BackendRules()...)
		}
		// The annotation is always written, empty for none, so that this
		// field manager owns it from the first write on.
		ann := map[string]string{localBackendsAnnotation: strings.Join(wantLocal, ",")}
		var written *rbacv1.Role
		var err error
		if q.role == nil {
			// Create, not apply: two processes creating the Role at once
			// must not both succeed.
			role := &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: key.ns, Labels: gwruntime.RuntimeLabels(key.gw), Annotations: ann},
				Rules:      rules,
			}
			written, err = roles.Create(ctx, role, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				// Created by another process since it was read: read it
				// again, as after a conflict.
				err = apierrors.NewConflict(rbacv1.Resource("roles"), name, err)
			}
		} else {
			// Server-side apply with the resourceVersion read: the API
			// server refuses it (Conflict) if the Role changed since.
			role := rbacv1apply.Role(name, key.ns).WithResourceVersion(q.role.ResourceVersion).
				WithLabels(gwruntime.RuntimeLabels(key.gw)).WithAnnotations(ann).
				WithRules(gwruntime.PolicyRulesApply(rules)...)
			written, err = roles.Apply(ctx, role, ApplyOptions())
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

// routeStatusRoleRoutes are the routes role lists and those of them with
// backends in its namespace, sorted.
func routeStatusRoleRoutes(role *rbacv1.Role) (routes, local []string) {
	if role == nil {
		return nil, nil
	}
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "httproutes/status") {
			routes = append(routes, r.ResourceNames...)
		}
	}
	slices.Sort(routes)
	if a := role.Annotations[localBackendsAnnotation]; a != "" {
		for _, n := range strings.Split(a, ",") {
			if _, listed := slices.BinarySearch(routes, n); listed {
				local = append(local, n)
			}
		}
	}
	slices.Sort(local)
	return slices.Compact(routes), slices.Compact(local)
}

// setMember is the sorted set with name in it (in) or not.
func setMember(set []string, name string, in bool) []string {
	i, found := slices.BinarySearch(set, name)
	switch {
	case in && !found:
		return slices.Insert(set, i, name)
	case !in && found:
		return slices.Delete(set, i, i+1)
	}
	return set
}

// WriteRouteStatusRoles lists route in the route status Role of every
// varnishgw parent Gateway that accepts it (one per accepted fragment),
// and removes it from those of the Gateways in stale that no longer do.
func (c *Cluster) WriteRouteStatusRoles(ctx context.Context, route *gatewayv1.HTTPRoute, frags []*routing.Fragment, stale []object.Ref) error {
	want := map[object.Ref]bool{}
	local := map[object.Ref]bool{}
	for _, f := range frags {
		if f.Accepted() { // else the Gateway does not serve the route: its pods do not write its status
			want[f.Gateway] = true
			local[f.Gateway] = backendNamespaces(f)[route.Namespace]
		}
	}
	for _, gw := range sortedRefs(want) {
		if err := c.changeRouteStatusRole(ctx, gw, route.Namespace, route.Name, true, local[gw]); err != nil {
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
	return c.changeRouteStatusRole(ctx, gw, route.Namespace, route.Name, false, false)
}
