package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// How a route is read once per operation. The CLI runs one provider
// process per walk (a plan, or the apply of a plan), and in it calls, for
// each route, Read and then ModifyPlan (plan), or ModifyPlan and then
// Create or Update (apply), back to back. Each call hands what it read to
// the next one as a routeSnapshot, so that the pair reads the route's
// Gateways, GatewayClasses and Services once, and a route that did not
// change since the provider wrote it is not dry-run again. The private
// state of the resource records the HTTPRoute the provider wrote (its UID
// and generation), so that Read knows without a dry run that nobody
// changed its spec since.

// snapshotMaxAge bounds how long a snapshot is used: the calls it links
// follow each other within milliseconds.
const snapshotMaxAge = 30 * time.Second

// routeSnapshot is what one operation on a route read.
type routeSnapshot struct {
	at time.Time
	// route is the HTTPRoute as the API server stores it: read by Read,
	// or the dry run of ModifyPlan.
	route *gatewayv1.HTTPRoute
	// inputs are ModifyPlan's reads of the route's Gateways, classes and
	// Services; nil from Read.
	inputs *control.AttachInputs
}

// routeSnapshots are the snapshots of a provider process, by route.
type routeSnapshots struct {
	mu sync.Mutex
	m  map[object.Ref]routeSnapshot
}

// put records s for ref, replacing an earlier one.
func (r *routeSnapshots) put(ref object.Ref, s routeSnapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[object.Ref]routeSnapshot{}
	}
	s.at = time.Now()
	r.m[ref] = s
}

// take removes and returns the snapshot of ref, nil when there is none
// or it is older than snapshotMaxAge.
func (r *routeSnapshots) take(ref object.Ref) *routeSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[ref]
	delete(r.m, ref)
	if !ok || time.Since(s.at) > snapshotMaxAge {
		return nil
	}
	return &s
}

// sameSpec reports whether a and b are the same route to apply: the same
// metadata the provider writes and the same spec.
func sameSpec(a, b *gatewayv1.HTTPRoute) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name &&
		equality.Semantic.DeepEqual(a.Labels, b.Labels) && equality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// writtenRoute is the private state of a route resource: the HTTPRoute the
// provider last wrote or found unchanged.
type writtenRoute struct {
	UID        types.UID `json:"uid"`
	Generation int64     `json:"generation"`
}

const writtenRouteKey = "route"

// privateState is the framework's private state of a resource, as the
// requests and responses of Read, ModifyPlan, Create and Update have it.
type privateState interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

// readWrittenRoute is the route recorded in p, nil when none is.
func readWrittenRoute(ctx context.Context, p privateState) *writtenRoute {
	if p == nil {
		return nil
	}
	b, d := p.GetKey(ctx, writtenRouteKey)
	if d.HasError() || len(b) == 0 {
		return nil
	}
	var w writtenRoute
	if err := json.Unmarshal(b, &w); err != nil || w.UID == "" {
		return nil
	}
	return &w
}

// is reports whether live is the route recorded and its spec has not
// changed since (the API server raises the generation on every change).
func (w *writtenRoute) is(live *gatewayv1.HTTPRoute) bool {
	return w != nil && w.UID == live.UID && w.Generation == live.Generation
}

// recordWrittenRoute stores live in the private state.
func recordWrittenRoute(ctx context.Context, set func(context.Context, string, []byte) diag.Diagnostics, live *gatewayv1.HTTPRoute) diag.Diagnostics {
	b, err := json.Marshal(writtenRoute{UID: live.UID, Generation: live.Generation})
	if err != nil {
		var d diag.Diagnostics
		d.AddError("Record the HTTP route", fmt.Sprintf("encode the private state: %v; this is a bug in the provider", err))
		return d
	}
	return set(ctx, writtenRouteKey, b)
}
