package conformance

import (
	"slices"
	"testing"

	"sigs.k8s.io/gateway-api/pkg/features"
)

// TestSupportedFeatures checks the list's form: sorted, without
// duplicates, each a feature of the Gateway API version in go.mod (what
// features it claims is TestConformanceReplay's to check).
func TestSupportedFeatures(t *testing.T) {
	got := SupportedFeatures()
	if !slices.IsSorted(got) {
		t.Errorf("SupportedFeatures() = %v, want it sorted (status.supportedFeatures is a sorted list)", got)
	}
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("SupportedFeatures() = %v has duplicates", got)
	}
	known := features.SetsToNamesSet(features.AllFeatures)
	for _, f := range got {
		if !known.Has(f) {
			t.Errorf("%s is not a feature of sigs.k8s.io/gateway-api/pkg/features", f)
		}
	}
	got[0] = "changed"
	if SupportedFeatures()[0] == "changed" {
		t.Error("SupportedFeatures returns the package's own slice: a caller's change would change the claim")
	}
}
