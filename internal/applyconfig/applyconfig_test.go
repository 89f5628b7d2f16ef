package applyconfig

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
)

func TestFrom(t *testing.T) {
	path := gatewayv1.PathMatchPathPrefix
	ps := gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Name: "gw"},
		ControllerName: "varnishgw.dev/gateway-controller",
		Conditions:     []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted", Message: "ok", ObservedGeneration: 3, LastTransitionTime: metav1.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)}},
	}
	spec := gatewayv1.HTTPRouteSpec{Hostnames: []gatewayv1.Hostname{"a.example.com"},
		Rules: []gatewayv1.HTTPRouteRule{{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &path, Value: ptr("/a")}}}}}}
	for _, tc := range []struct {
		name string
		v    any
		conv func(any) (any, error)
	}{
		{"route parent status", ps, func(v any) (any, error) { return From[gatewayv1apply.RouteParentStatusApplyConfiguration](v) }},
		{"route spec", spec, func(v any) (any, error) { return From[gatewayv1apply.HTTPRouteSpecApplyConfiguration](v) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ac, err := tc.conv(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(ac)
			want, _ := json.Marshal(tc.v)
			if string(got) != string(want) {
				t.Errorf("apply configuration %s, want the typed value's JSON %s", got, want)
			}
		})
	}
}

// TestFromRefusesAFieldTheTargetLacks: a field the apply configuration has
// no place for is an error, never dropped.
func TestFromRefusesAFieldTheTargetLacks(t *testing.T) {
	_, err := From[gatewayv1apply.ParentReferenceApplyConfiguration](gatewayv1.HTTPRouteSpec{Hostnames: []gatewayv1.Hostname{"a"}})
	if err == nil || !strings.Contains(err.Error(), "hostnames") {
		t.Errorf("From of a spec as a parentRef: %v, want an error naming hostnames", err)
	}
}

func ptr[T any](v T) *T { return &v }
