package control

import (
	"context"
	"fmt"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/applyconfig"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
)

// resolvedRefs is the route condition type the gateway pods write for the
// routes they serve.
const resolvedRefs = string(gatewayv1.RouteConditionResolvedRefs)

// PodsWriteResolvedRefs returns the Gateways, among the parents of frags
// that accept the route, whose pods write the route's ResolvedRefs
// condition: the Gateway has Ready pods, and they are of a release that
// writes route status (they own their listeners' attachedRoutes,
// podsCountRoutes). For the other parents the provider writes it: no pod
// serves the route there. A Gateway that cannot be read counts as one
// without pods.
func (c *Cluster) PodsWriteResolvedRefs(ctx context.Context, frags []*routing.Fragment) map[object.Ref]bool {
	out := map[object.Ref]bool{}
	for _, f := range frags {
		if !f.Accepted() || out[f.Gateway] {
			continue
		}
		if pods, err := c.servedPodsRecently(ctx, f.Gateway); err != nil || len(pods) == 0 {
			continue
		}
		gw, err := c.getGateway(ctx, f.Gateway)
		if err != nil {
			continue
		}
		for _, l := range gw.Spec.Listeners {
			if podsCountRoutes(gw, l.Name) {
				out[f.Gateway] = true
				break
			}
		}
	}
	return out
}

// WriteRouteStatus sets status.parents of the route: the entries of varnishgw's
// parents from the fragments, keeping other controllers' entries (the list
// is atomic) and the transition time of unchanged conditions. In the
// entries of the Gateways in podsWrite, ResolvedRefs is the one the pods
// wrote, or none until they do: the route is read again, and written with
// its resource version, so that a pod's write in between is not undone.
func (c *Cluster) WriteRouteStatus(ctx context.Context, route *gatewayv1.HTTPRoute, frags []*routing.Fragment, podsWrite map[object.Ref]bool) error {
	routes := c.Gateway.GatewayV1().HTTPRoutes(route.Namespace)
	// A conflict: a pod wrote ResolvedRefs since the read; read it again.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := route
		if len(podsWrite) > 0 {
			var err error
			if cur, err = routes.Get(ctx, route.Name, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("read HTTPRoute %s/%s to set its status: %w", route.Namespace, route.Name, err)
			}
		}
		ac := routeStatusApply(cur, route.Generation, frags, podsWrite, metav1.Now().Rfc3339Copy())
		if ac == nil {
			return nil
		}
		if len(podsWrite) > 0 {
			ac.WithResourceVersion(cur.ResourceVersion)
		}
		if _, err := routes.ApplyStatus(ctx, ac, ApplyOptions()); err != nil {
			return fmt.Errorf("set the status of HTTPRoute %s/%s: %w", route.Namespace, route.Name, err)
		}
		return nil
	})
}

// routeStatusApply is writeStatus's apply configuration, with the entries
// converted by parentApply, of the status of
// cur for the route generation gen, nil when there is nothing to write
// (no varnishgw parent, before or now).
func routeStatusApply(cur *gatewayv1.HTTPRoute, gen int64, frags []*routing.Fragment, podsWrite map[object.Ref]bool, now metav1.Time) *gatewayv1apply.HTTPRouteApplyConfiguration {
	st := gatewayv1apply.HTTPRouteStatus()
	hadOurs := false
	for _, p := range cur.Status.Parents {
		if p.ControllerName != gwruntime.ControllerName {
			st.WithParents(parentStatusApply(p))
		} else {
			hadOurs = true
		}
	}
	if len(frags) == 0 && !hadOurs {
		return nil // no varnishgw parent: leave the status to the others
	}
	for _, f := range frags {
		for _, ps := range f.Parents {
			// One builder for both writers (status.RouteParent): the pods'
			// ResolvedRefs stays as they wrote it when they write it.
			rp := ps.RouteParent(gwruntime.ControllerName, gen)
			if podsWrite[f.Gateway] {
				rp.Keep = func(t string) bool { return t == resolvedRefs }
			}
			st.WithParents(parentStatusApply(rp.Build(ourParentStatus(cur, ps.ParentRef), now)))
		}
	}
	if st.Parents == nil {
		st.Parents = []gatewayv1apply.RouteParentStatusApplyConfiguration{} // the list is required: [] removes ours
	}
	return gatewayv1apply.HTTPRoute(cur.Name, cur.Namespace).WithStatus(st)
}

// ourParentStatus is varnishgw's status entry of parentRef in route, nil
// when it has none.
func ourParentStatus(route *gatewayv1.HTTPRoute, parentRef gatewayv1.ParentReference) *gatewayv1.RouteParentStatus {
	for i, p := range route.Status.Parents {
		if p.ControllerName == gwruntime.ControllerName && routing.SameParentRef(p.ParentRef, parentRef, route.Namespace) {
			return &route.Status.Parents[i]
		}
	}
	return nil
}

// WaitResolvedRefs waits, within timeout, until the pods of the Gateways
// in podsWrite have written the ResolvedRefs condition of the route's
// generation in each of their entries, so that the apply returns with the
// status of what it applied. It returns the entries still without it.
func (c *Cluster) WaitResolvedRefs(ctx context.Context, route *gatewayv1.HTTPRoute, frags []*routing.Fragment, podsWrite map[object.Ref]bool, timeout time.Duration) error {
	if len(podsWrite) == 0 {
		return nil
	}
	left, err := pollPending(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) ([]string, error) {
		cur, err := c.Gateway.GatewayV1().HTTPRoutes(route.Namespace).Get(ctx, route.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		var pending []string
		for _, f := range frags {
			if !podsWrite[f.Gateway] {
				continue
			}
			for _, ps := range f.Parents {
				var c *metav1.Condition
				if p := ourParentStatus(cur, ps.ParentRef); p != nil {
					c = meta.FindStatusCondition(p.Conditions, resolvedRefs)
				}
				if c == nil || c.ObservedGeneration != route.Generation {
					pending = append(pending, fmt.Sprintf("parent %s (Gateway %s)", parentRefString(ps.ParentRef, route.Namespace), f.Gateway))
				}
			}
		}
		return pending, nil
	}, nil)
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil && wait.Interrupted(err):
		return fmt.Errorf("the gateway pods did not write the route's ResolvedRefs condition for generation %d within %s: %s",
			route.Generation, timeout, left)
	}
	return fmt.Errorf("wait for the gateway pods to write the route's ResolvedRefs condition: %w", err)
}

// parentRefString names a parentRef of a route in routeNS for messages:
// [Kind/]namespace/name[/section][:port].
func parentRefString(p gatewayv1.ParentReference, routeNS string) string {
	s := routeNS
	if p.Namespace != nil {
		s = string(*p.Namespace)
	}
	s += "/" + string(p.Name)
	if p.Kind != nil && *p.Kind != gatewayKind {
		s = string(*p.Kind) + "/" + s
	}
	if p.SectionName != nil {
		s += "/" + string(*p.SectionName)
	}
	if p.Port != nil {
		s += fmt.Sprintf(":%d", *p.Port)
	}
	return s
}

// parentStatusApply is the apply configuration of a status.parents entry.
func parentStatusApply(p gatewayv1.RouteParentStatus) *gatewayv1apply.RouteParentStatusApplyConfiguration {
	return applyconfig.Of[gatewayv1apply.RouteParentStatusApplyConfiguration](p)
}
