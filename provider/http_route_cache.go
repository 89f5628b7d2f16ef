package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
type gatewayPolicies map[routing.ObjectRef]*routing.CachePolicy

// policiesOf reads the default cache policies of the parent Gateways that
// exist; an invalid annotation is an error naming it.
func policiesOf(parents []routeParent) (gatewayPolicies, error) {
	out := gatewayPolicies{}
	for _, p := range parents {
		if p.gateway == nil || !p.ours {
			continue
		}
		c, err := routing.GatewayCachePolicy(p.gateway)
		if err != nil {
			return nil, err
		}
		out[p.ref] = c
	}
	return out, nil
}

// gatewayPoliciesOf reads the Gateways of frags for their default cache
// policies (for Read, which has the stored fragments but not the parents).
func (c *clients) gatewayPoliciesOf(ctx context.Context, frags []*routing.Fragment) (gatewayPolicies, error) {
	out := gatewayPolicies{}
	for _, f := range frags {
		gw, err := c.gateway.GatewayV1().Gateways(f.Gateway.Namespace).Get(ctx, f.Gateway.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get Gateway %s for its cache policy: %w", f.Gateway, err)
		}
		p, err := routing.GatewayCachePolicy(gw)
		if err != nil {
			return nil, err
		}
		out[f.Gateway] = p
	}
	return out, nil
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
