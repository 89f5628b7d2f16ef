package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// A route rule's cache block travels in the route's RoutingFragments
// (routing.Rule.Cache), where the gateway pods merge it with their
// Gateway's default (routing.EffectiveCache). effective_cache shows the
// result of that merge in the plan.

// setRuleCaches puts the rules' cache blocks into the fragments attached
// from the route m describes (fragment rules carry their spec index).
func (m *httpRouteModel) setRuleCaches(frags []*routing.Fragment) {
	for _, f := range frags {
		for j := range f.Rules {
			if i := f.Rules[j].Index; i >= 0 && i < len(m.Rules) {
				f.Rules[j].Cache = m.Rules[i].Cache.policy()
			}
		}
	}
}

// gatewayPolicies are the default cache policies of Gateways, by
// namespace/name; a Gateway without one maps to nil.
type gatewayPolicies map[object.Ref]*routing.CachePolicy

// gatewayCachePoliciesKey is the private state key of the Gateways'
// cache policy annotations the route's effective_cache was computed from
// (a JSON object: Gateway namespace/name to the annotation's value, ""
// for none), so that a plan computes it again the same way.
const gatewayCachePoliciesKey = "gateway_cache_policies"

// policiesAndRecord reads the default cache policies of gws and the
// record of their annotations for the private state.
func policiesAndRecord(gws []*gatewayv1.Gateway) (gatewayPolicies, []byte, error) {
	out := gatewayPolicies{}
	raw := map[string]string{}
	for _, gw := range gws {
		p, err := routing.GatewayCachePolicy(gw)
		if err != nil {
			return nil, nil, err
		}
		ref := object.Ref{Namespace: gw.Namespace, Name: gw.Name}
		out[ref] = p
		raw[ref.String()] = gw.Annotations[routing.CachePolicyAnnotation]
	}
	record, err := json.Marshal(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the Gateways' cache policies: %w", err)
	}
	return out, record, nil
}

// policiesOf reads the default cache policies of the parent Gateways that
// exist and varnishgw serves; an invalid annotation is an error naming it.
func policiesOf(parents []control.RouteParent) (gatewayPolicies, []byte, error) {
	var gws []*gatewayv1.Gateway
	for _, p := range parents {
		if p.Gateway != nil && p.Ours {
			gws = append(gws, p.Gateway)
		}
	}
	return policiesAndRecord(gws)
}

// gatewayPoliciesOf reads the Gateways of frags for their default cache
// policies (for Read, which has the stored fragments but not the parents).
func (c *clients) gatewayPoliciesOf(ctx context.Context, frags []*routing.Fragment) (gatewayPolicies, []byte, error) {
	gws, err := c.FragmentGateways(ctx, frags)
	if err != nil {
		return nil, nil, err
	}
	return policiesAndRecord(gws)
}

// recordedPolicies are the policies of a private state record, if it
// covers the Gateway of every accepted fragment of frags.
func recordedPolicies(record []byte, frags []*routing.Fragment) (gatewayPolicies, bool) {
	if record == nil {
		return nil, false
	}
	var raw map[string]string
	if err := json.Unmarshal(record, &raw); err != nil {
		return nil, false
	}
	out := gatewayPolicies{}
	for _, f := range frags {
		if !f.Accepted() {
			continue
		}
		v, ok := raw[f.Gateway.String()]
		if !ok {
			return nil, false
		}
		if v == "" {
			out[f.Gateway] = nil
			continue
		}
		p, err := routing.ParseCachePolicy(field.NewPath("metadata", "annotations").Key(routing.CachePolicyAnnotation), v)
		if err != nil {
			return nil, false
		}
		out[f.Gateway] = p
	}
	return out, true
}

// effectiveCache is the effective_cache of the fragments: one element per
// accepted fragment's Gateway (sorted) and rule, the policy the gateway
// pods apply to the rule.
func effectiveCache(frags []*routing.Fragment, policies gatewayPolicies) types.List {
	sorted := slices.Clone(frags)
	slices.SortFunc(sorted, func(a, b *routing.Fragment) int { return strings.Compare(a.Gateway.String(), b.Gateway.String()) })
	var entries []effectiveCacheEntry
	for _, f := range sorted {
		gw, ok := policies[f.Gateway]
		if !ok || !f.Accepted() {
			continue
		}
		for j := range f.Rules {
			r := &f.Rules[j]
			entries = append(entries, effectiveCacheEntry{gateway: f.Gateway.String(), rule: r.Index, policy: routing.EffectiveCache(gw, r.Cache)})
		}
	}
	return effectiveCacheList(entries)
}

// ruleCachesFromFragments sets the cache blocks of the rules of an
// imported route from its stored fragments (the first accepted one: every
// fragment of a route carries the same rules).
func (m *httpRouteModel) ruleCachesFromFragments(frags []*routing.Fragment) {
	for _, f := range frags {
		if !f.Accepted() {
			continue
		}
		for j := range f.Rules {
			if i := f.Rules[j].Index; i >= 0 && i < len(m.Rules) {
				m.Rules[i].Cache = cachePolicyModelOf(f.Rules[j].Cache)
			}
		}
		return
	}
}
