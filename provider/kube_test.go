package provider

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCondition checks the lastTransitionTime rule of condition: kept
// while the status of the type stays, now when it changes or the type is
// new.
func TestCondition(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	existing := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: then},
		{Type: "Other", Status: metav1.ConditionFalse, Reason: "No", LastTransitionTime: then},
	}
	for _, tc := range []struct {
		name     string
		want     metav1.Condition
		keepTime bool
	}{
		{"same status, new reason and message", metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Again", Message: "m", ObservedGeneration: 2}, true},
		{"status changes", metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "InvalidParameters", Message: "m", ObservedGeneration: 2}, false},
		{"new type", metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", ObservedGeneration: 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]metav1.Condition(nil), existing...)
			got := condition(existing, tc.want)
			if *got.Type != tc.want.Type || *got.Status != tc.want.Status || *got.Reason != tc.want.Reason ||
				*got.Message != tc.want.Message || *got.ObservedGeneration != tc.want.ObservedGeneration {
				t.Errorf("condition = %+v, want the fields of %+v", got, tc.want)
			}
			if kept := got.LastTransitionTime.Equal(&then); kept != tc.keepTime {
				t.Errorf("lastTransitionTime %v: kept = %v, want %v", got.LastTransitionTime, kept, tc.keepTime)
			}
			if !tc.keepTime && time.Since(got.LastTransitionTime.Time) > time.Minute {
				t.Errorf("lastTransitionTime %v, want now", got.LastTransitionTime)
			}
			if len(existing) != len(before) || existing[0] != before[0] {
				t.Errorf("condition changed existing: %+v", existing)
			}
		})
	}
}
