package provider

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// routingView is one element of the routing attribute: what the route
// contributes to one parent Gateway.
type routingView struct {
	Gateway   string                     `json:"gateway"`
	Accepted  bool                       `json:"accepted"`
	Listeners []routing.AttachedListener `json:"listeners"`
	Rules     []routing.Rule             `json:"rules"`
	Status    []routingStatusView        `json:"status"`
}

type routingStatusView struct {
	SectionName string              `json:"section_name,omitempty"`
	Port        int32               `json:"port,omitempty"`
	Conditions  []routing.Condition `json:"conditions"`
}

// routingJSON renders fragments as the routing attribute: a JSON array,
// one object per parent Gateway sorted by namespace/name, without the
// route's identity (uid, generation, creation time), so the value computed
// at plan time equals the value read back from the stored fragments.
func routingJSON(frags []*routing.Fragment) (string, error) {
	views := []routingView{}
	for _, f := range frags {
		v := routingView{Gateway: f.Gateway.String(), Accepted: f.Accepted(), Listeners: f.Listeners, Rules: f.Rules}
		if v.Listeners == nil {
			v.Listeners = []routing.AttachedListener{}
		}
		if v.Rules == nil {
			v.Rules = []routing.Rule{}
		}
		for _, p := range f.Parents {
			s := routingStatusView{Conditions: p.Conditions}
			if p.ParentRef.SectionName != nil {
				s.SectionName = string(*p.ParentRef.SectionName)
			}
			if p.ParentRef.Port != nil {
				s.Port = int32(*p.ParentRef.Port)
			}
			v.Status = append(v.Status, s)
		}
		views = append(views, v)
	}
	slices.SortFunc(views, func(a, b routingView) int { return strings.Compare(a.Gateway, b.Gateway) })
	out, err := json.Marshal(views)
	return string(out), err
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func sortedRefs(m map[object.Ref]bool) []object.Ref {
	out := slices.Collect(maps.Keys(m))
	slices.SortFunc(out, func(a, b object.Ref) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// applyRoute writes the HTTPRoute spec with server-side apply and returns
// the object the API server stored. dryRun returns what it would store.
func (c *clients) applyRoute(ctx context.Context, route *gatewayv1.HTTPRoute, dryRun bool) (*gatewayv1.HTTPRoute, error) {
	opts := control.ApplyOptions()
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return c.Gateway.GatewayV1().HTTPRoutes(route.Namespace).Apply(ctx, httpRouteApply(route), opts)
}
