package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RouteParent is one parent Gateway of a route as the provider sees it.
type RouteParent struct {
	Ref     object.Ref
	Gateway *gatewayv1.Gateway // nil when the Gateway does not exist
	Ours    bool               // its GatewayClass is served by varnishgw
	// ExternalNames: its class has external_name_services, so backendRefs
	// may name ExternalName Services.
	ExternalNames bool
	// PendingListenerSet: ref is a ListenerSet the route names that was
	// not found, whose Gateway is thus unknown.
	PendingListenerSet bool
}

// ParentGateways lists the distinct Gateways the route's parentRefs name,
// sorted, with the Gateway and whether varnishgw serves it.
func (c *Cluster) ParentGateways(ctx context.Context, route *gatewayv1.HTTPRoute) ([]RouteParent, error) {
	var out []RouteParent
	seen := map[object.Ref]bool{}
	type classInfo struct{ Ours, ExternalNames bool }
	classes := map[string]classInfo{}
	refs, unresolved := c.resolveParentRefs(ctx, route)
	for _, ref := range unresolved {
		// A ListenerSet not found (yet): its Gateway is unknown, so the
		// route's routing is known after apply.
		out = append(out, RouteParent{Ref: ref, PendingListenerSet: true})
	}
	for _, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		rp := RouteParent{Ref: ref}
		gw, err := c.getGateway(ctx, ref)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get parent Gateway %s: %w", ref, err)
		default:
			rp.Gateway = gw
			class := string(gw.Spec.GatewayClassName)
			info, ok := classes[class]
			if !ok {
				gc, err := c.getGatewayClass(ctx, class)
				if err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("get GatewayClass %s of Gateway %s: %w", class, ref, err)
				}
				info.Ours = err == nil && gc.Spec.ControllerName == gwruntime.ControllerName
				if info.Ours {
					if info.ExternalNames, err = c.ClassExternalNames(ctx, gc); err != nil {
						return nil, fmt.Errorf("parent Gateway %s: %w", ref, err)
					}
				}
				classes[class] = info
			}
			rp.Ours, rp.ExternalNames = info.Ours, info.ExternalNames
		}
		out = append(out, rp)
	}
	slices.SortFunc(out, func(a, b RouteParent) int { return strings.Compare(a.Ref.String(), b.Ref.String()) })
	return out, nil
}

// routingObjects reads the cluster objects Attach needs for route: the
// Services its backendRefs and mirrors name, the ReferenceGrants of the
// namespaces they are in, and the route's Namespace when a parent listener
// selects namespaces by label.
func (c *Cluster) routingObjects(ctx context.Context, route *gatewayv1.HTTPRoute, parents []RouteParent) (*routing.Objects, error) {
	objs := &routing.Objects{}
	services := map[object.Ref]bool{}
	grantNamespaces := map[string]bool{}
	addRef := func(ref gatewayv1.BackendObjectReference) {
		if ref.Kind != nil && *ref.Kind != "Service" || ref.Group != nil && *ref.Group != "" {
			return
		}
		o := object.Ref{Namespace: route.Namespace, Name: string(ref.Name)}
		if ref.Namespace != nil {
			o.Namespace = string(*ref.Namespace)
		}
		services[o] = true
		if o.Namespace != route.Namespace {
			grantNamespaces[o.Namespace] = true
		}
	}
	for _, r := range route.Spec.Rules {
		for _, b := range r.BackendRefs {
			addRef(b.BackendObjectReference)
		}
		for _, f := range r.Filters {
			if f.RequestMirror != nil {
				addRef(f.RequestMirror.BackendRef)
			}
		}
	}
	for _, ref := range sortedRefs(services) {
		svc, err := c.getService(ctx, ref)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get backend Service %s: %w", ref, err)
		}
		objs.Services = append(objs.Services, svc)
	}
	for _, ns := range slices.Sorted(mapsKeys(grantNamespaces)) {
		list, err := c.Gateway.GatewayV1().ReferenceGrants(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list ReferenceGrants in namespace %s: %w", ns, err)
		}
		for i := range list.Items {
			objs.ReferenceGrants = append(objs.ReferenceGrants, &list.Items[i])
		}
	}
	needNamespace := false
	selects := func(ar *gatewayv1.AllowedRoutes) bool {
		return ar != nil && ar.Namespaces != nil && ar.Namespaces.From != nil && *ar.Namespaces.From == gatewayv1.NamespacesFromSelector
	}
	for _, p := range parents {
		if p.Gateway == nil {
			continue
		}
		for _, l := range p.Gateway.Spec.Listeners {
			needNamespace = needNamespace || selects(l.AllowedRoutes)
		}
		if !p.Ours {
			continue
		}
		// Attach composes the Gateway with its ListenerSets.
		sets, namespaces, err := c.listenerSetsOf(ctx, p.Gateway)
		if err != nil {
			return nil, err
		}
		objs.ListenerSets = append(objs.ListenerSets, sets...)
		// Whether their HTTPS listeners are served depends on the
		// ReferenceGrants of their certificates' namespaces.
		grants, err := c.certificateGrants(ctx, sets)
		if err != nil {
			return nil, err
		}
		objs.ReferenceGrants = append(objs.ReferenceGrants, grants...)
		for _, n := range namespaces {
			if !slices.ContainsFunc(objs.Namespaces, func(o *corev1.Namespace) bool { return o.Name == n.Name }) {
				objs.Namespaces = append(objs.Namespaces, n)
			}
		}
		for _, ls := range sets {
			for _, l := range ls.Spec.Listeners {
				needNamespace = needNamespace || selects(l.AllowedRoutes)
			}
		}
	}
	if needNamespace && !slices.ContainsFunc(objs.Namespaces, func(o *corev1.Namespace) bool { return o.Name == route.Namespace }) {
		ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, route.Namespace, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get Namespace %s: %w", route.Namespace, err)
		}
		if err == nil {
			objs.Namespaces = append(objs.Namespaces, ns)
		}
	}
	return objs, nil
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func sortedRefs(m map[object.Ref]bool) []object.Ref {
	out := slices.Collect(mapsKeys(m))
	slices.SortFunc(out, func(a, b object.Ref) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// AttachInputs are the cluster objects routing.Attach needs for a route:
// its parent Gateways (with whether varnishgw serves them) and the objects
// routingObjects reads.
type AttachInputs struct {
	Parents []RouteParent
	Objs    *routing.Objects
}

// ReadAttachInputs reads the AttachInputs of route.
func (c *Cluster) ReadAttachInputs(ctx context.Context, route *gatewayv1.HTTPRoute) (*AttachInputs, error) {
	parents, err := c.ParentGateways(ctx, route)
	if err != nil {
		return nil, err
	}
	objs, err := c.routingObjects(ctx, route, parents)
	if err != nil {
		return nil, err
	}
	return &AttachInputs{Parents: parents, Objs: objs}, nil
}

// Complete reports whether every parent Gateway was found: a plan that
// did not find one makes the route's routing known only after apply, and
// the apply reads it again.
func (in *AttachInputs) Complete() bool {
	for _, p := range in.Parents {
		if p.Gateway == nil {
			return false
		}
	}
	return true
}

// Attach runs routing.Attach of route for every parent Gateway varnishgw
// serves.
func (in *AttachInputs) Attach(route *gatewayv1.HTTPRoute) ([]*routing.Fragment, error) {
	var frags []*routing.Fragment
	for _, p := range in.Parents {
		if !p.Ours {
			continue
		}
		f, err := routing.Attach(p.Gateway, route, in.Objs.WithExternalNameServices(p.ExternalNames))
		if errors.Is(err, routing.ErrNotParent) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("attach the route to Gateway %s: %w", p.Ref, err)
		}
		frags = append(frags, f)
	}
	return frags, nil
}

// fragmentRouteAnnotation records which route an object the provider
// writes for it belongs to (backend RoleBindings).
const fragmentRouteAnnotation = "varnishgw.dev/route"

// ParentRefs are the distinct Gateways a route's parentRefs name, sorted:
// those named as parents, and the parents of the ListenerSets named (a
// ListenerSet that does not exist, or cannot be read, leads to none).
func (c *Cluster) ParentRefs(ctx context.Context, route *gatewayv1.HTTPRoute) []object.Ref {
	refs, _ := c.resolveParentRefs(ctx, route)
	return refs
}

// resolveParentRefs is parentRefs, which also returns the ListenerSets
// named that it could not read.
func (c *Cluster) resolveParentRefs(ctx context.Context, route *gatewayv1.HTTPRoute) (refs, unresolved []object.Ref) {
	seen := map[object.Ref]bool{}
	for _, p := range route.Spec.ParentRefs {
		if p.Group != nil && *p.Group != gatewayv1.GroupName {
			continue
		}
		ref := object.Ref{Namespace: route.Namespace, Name: string(p.Name)}
		if p.Namespace != nil {
			ref.Namespace = string(*p.Namespace)
		}
		switch {
		case p.Kind == nil || *p.Kind == gatewayKind:
			seen[ref] = true
		case *p.Kind == listenerSetKind && c != nil:
			ls, err := c.Gateway.GatewayV1().ListenerSets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				unresolved = append(unresolved, ref)
				continue
			}
			if gw, ok := routing.ListenerSetParent(ls); ok {
				seen[gw] = true
			}
		}
	}
	return sortedRefs(seen), unresolved
}

// backendBindingLabel marks the RoleBindings a route writes so that the
// chaperone of each parent Gateway can read the route's backends.
const backendBindingLabel = "varnishgw.dev/backend-binding"

// backendNamespaces are the namespaces of the Services the fragment's
// backendRefs and mirror backends name that the route may send traffic
// to: its own, and those whose ReferenceGrant permits it now. A namespace
// whose grant is missing gets no binding, so the Gateway's pods cannot read
// its Services; a grant created later takes effect at the route's next
// apply (docs/guides/cross-namespace-backends.md).
func backendNamespaces(f *routing.Fragment) map[string]bool {
	out := map[string]bool{}
	add := func(b routing.BackendRef) {
		switch b.Unresolved {
		case string(gatewayv1.RouteReasonInvalidKind), string(gatewayv1.RouteReasonRefNotPermitted):
			return
		}
		out[b.Namespace] = true
	}
	for _, r := range f.Rules {
		for _, b := range r.Backends {
			add(b)
		}
		for _, fl := range r.Filters {
			if fl.RequestMirror != nil {
				add(fl.RequestMirror.Backend)
			}
		}
	}
	return out
}

// WriteBackendBindings writes, for every varnishgw parent Gateway that
// accepts the route (one per accepted fragment) and every namespace other
// than the route's own that its backends live in and the route may reach
// (backendNamespaces), the RoleBinding gwruntime.BackendRoleBindingName(gw,
// route) that binds the Gateway's backend ClusterRole to its
// ServiceAccount there (in its own namespace the route status Role grants
// the same). It deletes
// the route's bindings that are no longer needed: namespaces no longer
// referenced, and Gateways in stale that are parents no more.
func (c *Cluster) WriteBackendBindings(ctx context.Context, route *gatewayv1.HTTPRoute, frags []*routing.Fragment, stale []object.Ref) error {
	routeRef := object.Ref{Namespace: route.Namespace, Name: route.Name}
	want := map[object.Ref]map[string]bool{}
	for _, f := range frags {
		if !f.Accepted() {
			continue // the Gateway does not serve the route: its pods need not read the backends
		}
		namespaces := backendNamespaces(f)
		// In the route's own namespace the route status Role lets the
		// pods read the backends (WriteRouteStatusRoles).
		delete(namespaces, route.Namespace)
		want[f.Gateway] = namespaces
		name := gwruntime.BackendRoleBindingName(f.Gateway, routeRef)
		lbl := gwruntime.GatewayLabels(f.Gateway)
		lbl[gwruntime.NamespaceLabel] = f.Gateway.Namespace
		lbl[backendBindingLabel] = "true"
		for k, v := range gwruntime.ManagedLabels() {
			lbl[k] = v
		}
		for _, ns := range slices.Sorted(mapsKeys(namespaces)) {
			rb := rbacv1apply.RoleBinding(name, ns).
				WithLabels(lbl).
				WithAnnotations(map[string]string{fragmentRouteAnnotation: routeRef.String()}).
				WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").
					WithName(gwruntime.BackendClusterRoleName(f.Gateway))).
				WithSubjects(rbacv1apply.Subject().WithKind("ServiceAccount").
					WithName(gwruntime.Name(f.Gateway)).WithNamespace(f.Gateway.Namespace))
			written, err := c.Kube.RbacV1().RoleBindings(ns).Apply(ctx, rb, ApplyOptions())
			if err != nil {
				return fmt.Errorf("apply RoleBinding %s/%s that lets Gateway %s read the backends of the route: %w", ns, name, f.Gateway, err)
			}
			c.backendBindings.wrote(f.Gateway, routeRef, ns, written.UID)
		}
	}
	gateways := map[object.Ref]bool{}
	for _, gw := range stale {
		gateways[gw] = true
	}
	for gw := range want {
		gateways[gw] = true
	}
	for _, gw := range sortedRefs(gateways) {
		if err := c.PruneBackendBindings(ctx, gw, routeRef, want[gw]); err != nil {
			return err
		}
	}
	return nil
}

// PruneBackendBindings deletes the RoleBindings of route for gw in every
// namespace not in keep, if they are the ones the route wrote.
func (c *Cluster) PruneBackendBindings(ctx context.Context, gw, route object.Ref, keep map[string]bool) error {
	have, err := c.backendBindings.of(ctx, c, gw, route)
	if err != nil {
		return err
	}
	name := gwruntime.BackendRoleBindingName(gw, route)
	for _, ns := range slices.Sorted(maps.Keys(have)) {
		if keep[ns] {
			continue
		}
		uid := have[ns]
		err := c.Kube.RbacV1().RoleBindings(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete RoleBinding %s/%s: %w", ns, name, err)
		}
		c.backendBindings.deleted(gw, route, ns)
	}
	return nil
}

// backendBindingCache holds, per Gateway, the backend RoleBindings of its
// routes (WriteBackendBindings), read with one list per Gateway and
// process and kept up to date with this process's writes. Only a route's
// own apply writes its bindings, so what the cache says of a route this
// process applies stays true.
type backendBindingCache struct {
	mu        sync.Mutex
	byGateway map[object.Ref]*gatewayBackendBindings
}

// gatewayBackendBindings are one Gateway's: per route, the namespaces
// holding its binding, with the binding's UID.
type gatewayBackendBindings struct {
	load    sync.Mutex
	loaded  bool
	byRoute map[object.Ref]map[string]types.UID
}

func (b *backendBindingCache) gateway(gw object.Ref) *gatewayBackendBindings {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byGateway == nil {
		b.byGateway = map[object.Ref]*gatewayBackendBindings{}
	}
	g := b.byGateway[gw]
	if g == nil {
		g = &gatewayBackendBindings{byRoute: map[object.Ref]map[string]types.UID{}}
		b.byGateway[gw] = g
	}
	return g
}

// of are route's bindings for gw: namespace → UID.
func (b *backendBindingCache) of(ctx context.Context, c *Cluster, gw, route object.Ref) (map[string]types.UID, error) {
	g := b.gateway(gw)
	g.load.Lock()
	if !g.loaded {
		sel := gwruntime.GatewayLabels(gw)
		sel[backendBindingLabel] = "true"
		sel[gwruntime.NamespaceLabel] = gw.Namespace
		list, err := c.Kube.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
		if err != nil {
			g.load.Unlock()
			return nil, fmt.Errorf("list the backend RoleBindings of the routes of Gateway %s: %w", gw, err)
		}
		b.mu.Lock()
		for _, rb := range list.Items {
			ns, name, _ := strings.Cut(rb.Annotations[fragmentRouteAnnotation], "/")
			r := object.Ref{Namespace: ns, Name: name}
			if rb.Name != gwruntime.BackendRoleBindingName(gw, r) {
				continue // not a route's binding for gw
			}
			if g.byRoute[r] == nil {
				g.byRoute[r] = map[string]types.UID{}
			}
			g.byRoute[r][rb.Namespace] = rb.UID
		}
		b.mu.Unlock()
		g.loaded = true
	}
	g.load.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(g.byRoute[route]), nil
}

// wrote records route's binding for gw in ns.
func (b *backendBindingCache) wrote(gw, route object.Ref, ns string, uid types.UID) {
	g := b.gateway(gw)
	b.mu.Lock()
	defer b.mu.Unlock()
	if g.byRoute[route] == nil {
		g.byRoute[route] = map[string]types.UID{}
	}
	g.byRoute[route][ns] = uid
}

// deleted records that route's binding for gw in ns is gone.
func (b *backendBindingCache) deleted(gw, route object.Ref, ns string) {
	g := b.gateway(gw)
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(g.byRoute[route], ns)
}

// RoutingBackendObjects reads what Resolve needs for the backends the fragments
// reference: per namespace the Services, the EndpointSlices of exactly
// those Services, and the ReferenceGrants (three requests per namespace).
func (c *Cluster) RoutingBackendObjects(ctx context.Context, frags []*routing.Fragment) (*routing.Objects, error) {
	want := map[string]map[string]bool{}
	add := func(b routing.BackendRef) {
		if want[b.Namespace] == nil {
			want[b.Namespace] = map[string]bool{}
		}
		want[b.Namespace][b.Name] = true
	}
	for _, f := range frags {
		for _, r := range f.Rules {
			for _, b := range r.Backends {
				add(b)
			}
			for _, fl := range r.Filters {
				if fl.RequestMirror != nil {
					add(fl.RequestMirror.Backend)
				}
			}
		}
	}
	objs := &routing.Objects{}
	for _, ns := range slices.Sorted(mapsKeys(want)) {
		names := slices.Sorted(mapsKeys(want[ns]))
		svcs, err := c.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list Services in namespace %s: %w", ns, err)
		}
		for i := range svcs.Items {
			if want[ns][svcs.Items[i].Name] {
				objs.Services = append(objs.Services, &svcs.Items[i])
			}
		}
		req, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.In, names)
		if err != nil {
			return nil, fmt.Errorf("EndpointSlice selector for Services %v: %w", names, err)
		}
		slicesList, err := c.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.NewSelector().Add(*req).String()})
		if err != nil {
			return nil, fmt.Errorf("list EndpointSlices in namespace %s: %w", ns, err)
		}
		for i := range slicesList.Items {
			objs.EndpointSlices = append(objs.EndpointSlices, &slicesList.Items[i])
		}
		grants, err := c.Gateway.GatewayV1().ReferenceGrants(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list ReferenceGrants in namespace %s: %w", ns, err)
		}
		for i := range grants.Items {
			objs.ReferenceGrants = append(objs.ReferenceGrants, &grants.Items[i])
		}
	}
	return objs, nil
}

// ServedHTTPRoutes lists the HTTPRoutes of namespace that match selector and
// that have a parent Gateway varnishgw serves, by name.
func (c *Cluster) ServedHTTPRoutes(ctx context.Context, namespace string, selector labels.Selector) ([]string, error) {
	routes, err := c.Gateway.GatewayV1().HTTPRoutes(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("list the HTTPRoutes of namespace %s: %w", namespace, err)
	}
	var names []string
	for i := range routes.Items {
		parents, err := c.ParentGateways(ctx, &routes.Items[i])
		if err != nil {
			return nil, fmt.Errorf("HTTPRoute %s/%s: %w", namespace, routes.Items[i].Name, err)
		}
		if slices.ContainsFunc(parents, func(p RouteParent) bool { return p.Ours }) {
			names = append(names, routes.Items[i].Name)
		}
	}
	slices.Sort(names)
	return names, nil
}
