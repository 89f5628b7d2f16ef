package status

import (
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestRouteParentBuild(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC))
	const ctrl = gatewayv1.GatewayController("varnishgw.dev/gateway")
	ref := gatewayv1.ParentReference{Name: "edge"}
	cond := func(typ string, st metav1.ConditionStatus, reason string, gen int64, ltt metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: reason + " message", ObservedGeneration: gen, LastTransitionTime: ltt}
	}
	want := func(cs ...metav1.Condition) gatewayv1.RouteParentStatus {
		return gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: ctrl, Conditions: cs}
	}
	accepted := cond("Accepted", metav1.ConditionTrue, "Accepted", 0, metav1.Time{})
	resolved := cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", 0, metav1.Time{})
	notFound := cond("ResolvedRefs", metav1.ConditionFalse, "BackendNotFound", 0, metav1.Time{})
	only := func(typ string) func(string) bool { return func(t string) bool { return t == typ } }
	allBut := func(typ string) func(string) bool { return func(t string) bool { return t != typ } }
	existing := &gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: ctrl, Conditions: []metav1.Condition{
		cond("Accepted", metav1.ConditionTrue, "Accepted", 1, then),
		cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", 1, then),
		cond("PartiallyInvalid", metav1.ConditionTrue, "UnsupportedValue", 1, then),
	}}
	for _, tc := range []struct {
		name     string
		p        RouteParent
		existing *gatewayv1.RouteParentStatus
		want     gatewayv1.RouteParentStatus
	}{
		{"new entry: every condition now, at the generation",
			RouteParent{ParentRef: ref, Controller: ctrl, Generation: 2, Set: []metav1.Condition{accepted, notFound}}, nil,
			want(cond("Accepted", "True", "Accepted", 2, now), cond("ResolvedRefs", "False", "BackendNotFound", 2, now))},
		{"the provider's apply: same status keeps the time, a changed one is now, others removed",
			RouteParent{ParentRef: ref, Controller: ctrl, Generation: 2, Set: []metav1.Condition{accepted, notFound}}, existing,
			want(cond("Accepted", "True", "Accepted", 2, then), cond("ResolvedRefs", "False", "BackendNotFound", 2, now))},
		{"the provider's apply where the pods own ResolvedRefs: theirs kept as it is",
			RouteParent{ParentRef: ref, Controller: ctrl, Generation: 2, Set: []metav1.Condition{accepted, notFound}, Keep: only("ResolvedRefs")}, existing,
			want(cond("Accepted", "True", "Accepted", 2, then), cond("ResolvedRefs", "True", "ResolvedRefs", 1, then))},
		{"the pods' own ResolvedRefs not written yet: none",
			RouteParent{ParentRef: ref, Controller: ctrl, Generation: 2, Set: []metav1.Condition{accepted, notFound}, Keep: only("ResolvedRefs")}, nil,
			want(cond("Accepted", "True", "Accepted", 2, now))},
		{"the pods' write: ResolvedRefs in its place, every other condition kept",
			RouteParent{ParentRef: ref, Controller: ctrl, Generation: 1, Set: []metav1.Condition{notFound}, Keep: allBut("ResolvedRefs")}, existing,
			want(existing.Conditions[0], cond("ResolvedRefs", "False", "BackendNotFound", 1, now), existing.Conditions[2])},
		{"the pods' write of a new type: appended",
			RouteParent{ParentRef: ref, Controller: ctrl, Generation: 1, Set: []metav1.Condition{resolved}, Keep: allBut("ResolvedRefs")},
			&gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: ctrl, Conditions: existing.Conditions[:1]},
			want(existing.Conditions[0], cond("ResolvedRefs", "True", "ResolvedRefs", 1, now))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before []metav1.Condition
			if tc.existing != nil {
				before = append(before, tc.existing.Conditions...)
			}
			got := tc.p.Build(tc.existing, now)
			if !apiequality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("Build =\n %+v\nwant\n %+v", got, tc.want)
			}
			if tc.existing != nil && !apiequality.Semantic.DeepEqual(tc.existing.Conditions, before) {
				t.Errorf("Build changed existing: %+v", tc.existing.Conditions)
			}
		})
	}
	t.Run("no change: equal to existing", func(t *testing.T) {
		p := RouteParent{ParentRef: ref, Controller: ctrl, Generation: 1, Set: []metav1.Condition{resolved}, Keep: allBut("ResolvedRefs")}
		if got := p.Build(existing, now); !apiequality.Semantic.DeepEqual(got, *existing) {
			t.Errorf("Build = %+v, want existing unchanged %+v", got, *existing)
		}
	})
	t.Run("long message cut", func(t *testing.T) {
		c := accepted
		c.Message = strings.Repeat("m", MaxMessage+1)
		got := RouteParent{ParentRef: ref, Controller: ctrl, Set: []metav1.Condition{c}}.Build(nil, now)
		if n := len(got.Conditions[0].Message); n > MaxMessage {
			t.Errorf("message of %d bytes, want at most %d", n, MaxMessage)
		}
	})
}
