package control

import (
	"context"
	"errors"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Published is what PublishRoute did.
type Published struct {
	// Fragments are the route's fragments, with the rules a gateway pod
	// rejected marked so (RejectedByPod).
	Fragments []*routing.Fragment
	// Served is the served wait's error: the route is written, but not
	// served as applied.
	Served error
	// StatusWarning says why the provider wrote the route's ResolvedRefs
	// condition itself, after the pods did not within the wait.
	StatusWarning string
}

// PublishRoute writes, for the route live stored and its fragments frags,
// what the gateways serve it from and its status: the backend RoleBindings
// (first: a gateway pod starts watching a backend namespace as soon as a
// fragment names it, and a watch refused for lack of a binding backs off
// for seconds before it tries again), the status Roles, the
// RoutingFragments (with wait, waiting up to timeout until the gateway
// pods serve them), the route's status and the ListenerSets' attached
// routes. stale are the Gateways the route may have had before; parents
// are its parent Gateways (ReadAttachInputs). An error after the status
// was written comes with what was done (its StatusWarning stands).
func (c *Cluster) PublishRoute(ctx context.Context, live *gatewayv1.HTTPRoute, frags []*routing.Fragment, stale []object.Ref,
	parents []RouteParent, wait bool, timeout time.Duration) (*Published, error) {
	if err := c.WriteBackendBindings(ctx, live, frags, stale); err != nil {
		return nil, err
	}
	if err := c.WriteRouteStatusRoles(ctx, live, frags, stale); err != nil {
		return nil, err
	}
	writes, err := c.WriteFragments(ctx, live, frags, stale, wait)
	if err != nil {
		return nil, err
	}
	out := &Published{}
	if wait {
		out.Served = c.WaitServed(ctx, writes, timeout)
	}
	var rejected *ServedError
	if errors.As(out.Served, &rejected) {
		frags = RejectedByPod(frags, rejected)
	}
	out.Fragments = frags
	// The entries and Accepted are the provider's; ResolvedRefs is the
	// pods' where they serve the route, and the apply waits for it.
	podsWrite := c.PodsWriteResolvedRefs(ctx, frags)
	if err := c.WriteRouteStatus(ctx, live, frags, podsWrite); err != nil {
		return nil, err
	}
	if out.Served == nil && wait {
		if err := c.WaitResolvedRefs(ctx, live, frags, podsWrite, timeout); err != nil {
			// Pods that serve the route but do not write its status
			// (stopped since, or another image): the provider writes it.
			out.StatusWarning = err.Error() + ". The provider wrote the condition itself; the gateway's pods may have stopped " +
				"(kubectl logs -c chaperone says why) or run an image of another release (apply the gateway again to roll them)."
			if err := c.WriteRouteStatus(ctx, live, frags, nil); err != nil {
				return out, err
			}
		}
	}
	// The attached routes of the ListenerSets' listeners.
	if NamesListenerSet(live) {
		for _, p := range parents {
			if p.Gateway == nil || !p.Ours {
				continue
			}
			if err := c.WriteListenerSetStatuses(ctx, p.Gateway); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}
