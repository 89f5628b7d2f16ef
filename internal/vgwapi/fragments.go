package vgwapi

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// NewFragment is the RoutingFragment of route for gw that stores fragment
// (the stored fragment, JSON: routing.MarshalFragment), for server-side
// apply.
func NewFragment(gw, route object.Ref, fragment []byte) (*unstructured.Unstructured, error) {
	var content map[string]any
	if err := json.Unmarshal(fragment, &content); err != nil {
		return nil, fmt.Errorf("encode the fragment of route %s for Gateway %s: %w", route, gw, err)
	}
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&FragmentSpec{Gateway: gw.Name, Route: route.String(), Fragment: content})
	if err != nil {
		return nil, fmt.Errorf("encode the fragment of route %s for Gateway %s: %w", route, gw, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(GroupVersion.String())
	obj.SetKind(RoutingFragmentKind)
	obj.SetNamespace(gw.Namespace)
	obj.SetName(gwruntime.FragmentName(gw, route))
	obj.SetLabels(gwruntime.GatewayLabels(gw))
	return obj, nil
}

// ReadFragment checks that the RoutingFragment obj belongs to gw (its
// namespace and spec.gateway) and returns its spec.route and its
// spec.fragment as JSON, for routing.UnmarshalFragment. The reader checks
// the object's name (CheckFragmentName) once the fragment is known valid,
// so that a bad fragment is reported as such.
func ReadFragment(gw object.Ref, obj *unstructured.Unstructured) (object.Ref, []byte, error) {
	if obj.GetNamespace() != gw.Namespace {
		return object.Ref{}, nil, fmt.Errorf("it is in namespace %q, not in the Gateway's namespace %q", obj.GetNamespace(), gw.Namespace)
	}
	var spec FragmentSpec
	raw, _, _ := unstructured.NestedMap(obj.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(raw, &spec, true); err != nil {
		return object.Ref{}, nil, fmt.Errorf("spec: %w", err)
	}
	if spec.Gateway != gw.Name {
		return object.Ref{}, nil, fmt.Errorf("spec.gateway is %q, not %q", spec.Gateway, gw.Name)
	}
	ns, name, ok := strings.Cut(spec.Route, "/")
	if !ok || ns == "" || name == "" {
		return object.Ref{}, nil, fmt.Errorf("spec.route is %q, not namespace/name", spec.Route)
	}
	route := object.Ref{Namespace: ns, Name: name}
	data, err := json.Marshal(spec.Fragment)
	if err != nil {
		return object.Ref{}, nil, fmt.Errorf("spec.fragment: %w", err)
	}
	return route, data, nil
}

// CheckFragmentName checks that obj, the RoutingFragment of route for gw,
// has the name FragmentName gives them: a fragment copied under another
// name is refused.
func CheckFragmentName(gw, route object.Ref, obj *unstructured.Unstructured) error {
	if want := gwruntime.FragmentName(gw, route); obj.GetName() != want {
		return fmt.Errorf("the fragment of route %s for Gateway %s must be named %s", route, gw, want)
	}
	return nil
}

// RejectionReason is the reason recorded for a fragment a reader refused
// with err: what is wrong and what to do.
func RejectionReason(err error) string {
	return fmt.Sprintf("%v; re-apply the route with the provider (terraform apply), which rewrites its fragment", err)
}
