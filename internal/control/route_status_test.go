package control

import (
	"encoding/json"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestRouteStatusApply: the provider writes its entries and Accepted for
// the route's generation; in the entries of Gateways whose pods write
// ResolvedRefs it keeps the pods' condition as they wrote it (or writes
// none before they have), and elsewhere it writes its own; other
// controllers' entries are written back unchanged.
func TestRouteStatusApply(t *testing.T) {
	before := metav1.Unix(1000, 0)
	now := metav1.Unix(2000, 0)
	withPods := object.Ref{Namespace: "infra", Name: "served"}
	without := object.Ref{Namespace: "infra", Name: "idle"}
	fresh := object.Ref{Namespace: "infra", Name: "fresh"}
	ns := gatewayv1.Namespace("infra")
	ref := func(gw object.Ref) gatewayv1.ParentReference {
		return gatewayv1.ParentReference{Namespace: &ns, Name: gatewayv1.ObjectName(gw.Name)}
	}
	frag := func(gw object.Ref) *routing.Fragment {
		return &routing.Fragment{Gateway: gw, Parents: []routing.ParentStatus{{ParentRef: ref(gw), Conditions: []routing.Condition{
			{Type: "Accepted", Status: "True", Reason: "Accepted", Message: "accepted"},
			{Type: "ResolvedRefs", Status: "True", Reason: "ResolvedRefs", Message: "all resolved"},
		}}}}
	}
	podsCond := metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "BackendNotFound",
		Message: "Service web not found", ObservedGeneration: 2, LastTransitionTime: before}
	cur := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web", Generation: 2}}
	cur.Status.Parents = []gatewayv1.RouteParentStatus{
		{ParentRef: gatewayv1.ParentReference{Name: "theirs"}, ControllerName: "example.com/other", Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1, LastTransitionTime: before}}},
		{ParentRef: ref(withPods), ControllerName: gwruntime.ControllerName, Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "accepted", ObservedGeneration: 1, LastTransitionTime: before},
			podsCond}},
		{ParentRef: ref(without), ControllerName: gwruntime.ControllerName, Conditions: []metav1.Condition{
			{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "BackendNotFound", ObservedGeneration: 1, LastTransitionTime: before}}},
	}
	ac := routeStatusApply(cur, 3, []*routing.Fragment{frag(withPods), frag(without), frag(fresh)},
		map[object.Ref]bool{withPods: true, fresh: true}, now)
	raw, err := json.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	var got gatewayv1.HTTPRoute
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	entry := func(name string) *gatewayv1.RouteParentStatus {
		for i, p := range got.Status.Parents {
			if string(p.ParentRef.Name) == name {
				return &got.Status.Parents[i]
			}
		}
		t.Fatalf("no entry for %s in %+v", name, got.Status.Parents)
		return nil
	}
	if len(got.Status.Parents) != 4 {
		t.Errorf("%d entries, want 4: %+v", len(got.Status.Parents), got.Status.Parents)
	}
	if c := meta.FindStatusCondition(entry("theirs").Conditions, "Accepted"); c == nil || c.ObservedGeneration != 1 {
		t.Errorf("the other controller's entry changed: %+v", entry("theirs"))
	}
	served := entry("served").Conditions
	if c := meta.FindStatusCondition(served, "Accepted"); c == nil || c.ObservedGeneration != 3 || !c.LastTransitionTime.Equal(&before) {
		t.Errorf("served Accepted = %+v, want generation 3 and the old transition time (unchanged status)", c)
	}
	if c := meta.FindStatusCondition(served, "ResolvedRefs"); c == nil || *c != podsCond {
		t.Errorf("served ResolvedRefs = %+v, want the pods' %+v untouched", c, podsCond)
	}
	if c := meta.FindStatusCondition(entry("idle").Conditions, "ResolvedRefs"); c == nil || c.Status != metav1.ConditionTrue ||
		c.ObservedGeneration != 3 || !c.LastTransitionTime.Equal(&now) {
		t.Errorf("idle ResolvedRefs = %+v, want the provider's True for generation 3, changed now", c)
	}
	fr := entry("fresh").Conditions
	if c := meta.FindStatusCondition(fr, "ResolvedRefs"); c != nil {
		t.Errorf("fresh ResolvedRefs = %+v, want none until the pods write it", c)
	}
	if c := meta.FindStatusCondition(fr, "Accepted"); c == nil || c.ObservedGeneration != 3 {
		t.Errorf("fresh Accepted = %+v, want generation 3", c)
	}
}
