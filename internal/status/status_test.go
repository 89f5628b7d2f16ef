package status

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTruncateMessage(t *testing.T) {
	for _, tt := range []struct {
		name string
		msg  string
	}{
		{"short", "route accepted"},
		{"exactly the limit", strings.Repeat("a", MaxMessage)},
		{"ascii over the limit", strings.Repeat("a", MaxMessage+10)},
		// "é" is two bytes: the cut at MaxMessage-3 falls inside one.
		{"rune on the cut", strings.Repeat("é", MaxMessage)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := TruncateMessage(tt.msg)
			if len(got) > MaxMessage {
				t.Errorf("%d bytes, want at most %d", len(got), MaxMessage)
			}
			if !utf8.ValidString(got) {
				t.Error("not valid UTF-8: a character was cut")
			}
			if len(tt.msg) <= MaxMessage && got != tt.msg {
				t.Error("a message within the limit was changed")
			}
			if len(tt.msg) > MaxMessage && !strings.HasSuffix(got, "...") {
				t.Error("a cut message does not end in ...")
			}
		})
	}
}

// TestCondition checks the lastTransitionTime rule of Condition: kept
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
			got := Condition(existing, tc.want)
			if *got.Type != tc.want.Type || *got.Status != tc.want.Status || *got.Reason != tc.want.Reason ||
				*got.Message != tc.want.Message || *got.ObservedGeneration != tc.want.ObservedGeneration {
				t.Errorf("Condition = %+v, want the fields of %+v", got, tc.want)
			}
			if kept := got.LastTransitionTime.Equal(&then); kept != tc.keepTime {
				t.Errorf("lastTransitionTime %v: kept = %v, want %v", got.LastTransitionTime, kept, tc.keepTime)
			}
			if !tc.keepTime && time.Since(got.LastTransitionTime.Time) > time.Minute {
				t.Errorf("lastTransitionTime %v, want now", got.LastTransitionTime)
			}
			if len(existing) != len(before) || existing[0] != before[0] {
				t.Errorf("Condition changed existing: %+v", existing)
			}
		})
	}
}
