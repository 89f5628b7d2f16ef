// Package routingfragment stores a route's routing.Fragment for one Gateway
// as a RoutingFragment object (vgwapi) and reads it back: the provider
// writes them, the gateway pods read them. It joins the two contracts so
// that neither imports the other.
package routingfragment

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// New is the RoutingFragment that stores f, for server-side apply.
func New(f *routing.Fragment) (*unstructured.Unstructured, error) {
	data, err := routing.MarshalFragment(f)
	if err != nil {
		return nil, err
	}
	return vgwapi.NewFragment(f.Gateway, object.Ref{Namespace: f.Route.Namespace, Name: f.Route.Name}, data)
}

// Read decodes and validates the RoutingFragment obj of gw: the object
// must belong to gw (vgwapi.ReadFragment), the fragment must be valid
// (routing.UnmarshalFragment: known fields only, this build's version,
// every value checked) and be for gw and the route the object names, and
// the object must have that route's name (vgwapi.CheckFragmentName).
func Read(gw object.Ref, obj *unstructured.Unstructured) (*routing.Fragment, error) {
	route, data, err := vgwapi.ReadFragment(gw, obj)
	if err != nil {
		return nil, err
	}
	f, err := routing.UnmarshalFragment(data)
	if err != nil {
		return nil, fmt.Errorf("spec.fragment: %w", err)
	}
	if f.Gateway != gw {
		return nil, fmt.Errorf("spec.fragment is for Gateway %s, not %s", f.Gateway, gw)
	}
	if got := (object.Ref{Namespace: f.Route.Namespace, Name: f.Route.Name}); got != route {
		return nil, fmt.Errorf("spec.route is %q, but spec.fragment is for route %s", route, got)
	}
	if err := vgwapi.CheckFragmentName(gw, route, obj); err != nil {
		return nil, err
	}
	return f, nil
}

// ReadAll reads the RoutingFragments of gw (Read), sorted by name. The ones
// it cannot use are returned as rejections, never as an error, so that one
// bad fragment costs only its own route.
func ReadAll(gw object.Ref, objs []*unstructured.Unstructured) ([]*routing.Fragment, []vgwapi.Rejection) {
	objs = append([]*unstructured.Unstructured(nil), objs...)
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	frags := []*routing.Fragment{}
	var rejected []vgwapi.Rejection
	for _, o := range objs {
		f, err := Read(gw, o)
		if err != nil {
			rejected = append(rejected, vgwapi.Rejection{Name: o.GetName(), ResourceVersion: o.GetResourceVersion(), Reason: vgwapi.RejectionReason(err)})
			continue
		}
		frags = append(frags, f)
	}
	return frags, rejected
}
