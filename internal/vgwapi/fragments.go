package vgwapi

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// NewFragment is the RoutingFragment that stores f, for server-side apply.
func NewFragment(f *routing.Fragment) (*unstructured.Unstructured, error) {
	data, err := routing.MarshalFragment(f)
	if err != nil {
		return nil, err
	}
	var content map[string]any
	if err := json.Unmarshal(data, &content); err != nil {
		return nil, fmt.Errorf("encode the fragment of route %s for Gateway %s: %w", f.Route, f.Gateway, err)
	}
	route := object.Ref{Namespace: f.Route.Namespace, Name: f.Route.Name}
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&FragmentSpec{Gateway: f.Gateway.Name, Route: route.String(), Fragment: content})
	if err != nil {
		return nil, fmt.Errorf("encode the fragment of route %s for Gateway %s: %w", f.Route, f.Gateway, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(GroupVersion.String())
	obj.SetKind(RoutingFragmentKind)
	obj.SetNamespace(f.Gateway.Namespace)
	obj.SetName(gwruntime.FragmentName(f.Gateway, route))
	obj.SetLabels(gwruntime.GatewayLabels(f.Gateway))
	return obj, nil
}

// ReadFragment decodes and validates the RoutingFragment obj of gw: the
// fragment must be valid (routing.UnmarshalFragment: known fields only,
// this build's version, every value checked) and belong to gw and to the
// route its name and spec say.
func ReadFragment(gw object.Ref, obj *unstructured.Unstructured) (*routing.Fragment, error) {
	if obj.GetNamespace() != gw.Namespace {
		return nil, fmt.Errorf("it is in namespace %q, not in the Gateway's namespace %q", obj.GetNamespace(), gw.Namespace)
	}
	var spec FragmentSpec
	raw, _, _ := unstructured.NestedMap(obj.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(raw, &spec, true); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if spec.Gateway != gw.Name {
		return nil, fmt.Errorf("spec.gateway is %q, not %q", spec.Gateway, gw.Name)
	}
	data, err := json.Marshal(spec.Fragment)
	if err != nil {
		return nil, fmt.Errorf("spec.fragment: %w", err)
	}
	f, err := routing.UnmarshalFragment(data)
	if err != nil {
		return nil, fmt.Errorf("spec.fragment: %w", err)
	}
	if f.Gateway != gw {
		return nil, fmt.Errorf("spec.fragment is for Gateway %s, not %s", f.Gateway, gw)
	}
	route := object.Ref{Namespace: f.Route.Namespace, Name: f.Route.Name}
	if spec.Route != route.String() {
		return nil, fmt.Errorf("spec.route is %q, but spec.fragment is for route %s", spec.Route, route)
	}
	if want := gwruntime.FragmentName(gw, route); obj.GetName() != want {
		return nil, fmt.Errorf("the fragment of route %s for Gateway %s must be named %s", route, gw, want)
	}
	return f, nil
}

// ReadFragments reads the RoutingFragments of gw (ReadFragment), sorted by
// name. The ones it cannot use are returned as rejections, never as an
// error, so that one bad fragment costs only its own route.
func ReadFragments(gw object.Ref, objs []*unstructured.Unstructured) ([]*routing.Fragment, []Rejection) {
	objs = append([]*unstructured.Unstructured(nil), objs...)
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	frags := []*routing.Fragment{}
	var rejected []Rejection
	for _, o := range objs {
		f, err := ReadFragment(gw, o)
		if err != nil {
			rejected = append(rejected, Rejection{Name: o.GetName(), ResourceVersion: o.GetResourceVersion(), Reason: RejectionReason(err)})
			continue
		}
		frags = append(frags, f)
	}
	return frags, rejected
}

// RejectionReason is the reason recorded for a fragment ReadFragment
// refused with err: what is wrong and what to do.
func RejectionReason(err error) string {
	return fmt.Sprintf("%v; re-apply the route with the provider (terraform apply), which rewrites its fragment", err)
}
