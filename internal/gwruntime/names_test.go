package gwruntime

import (
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestFragmentName(t *testing.T) {
	gw := object.Ref{Namespace: "infra", Name: "gw"}
	a := FragmentName(gw, object.Ref{Namespace: "a-b", Name: "c"})
	b := FragmentName(gw, object.Ref{Namespace: "a", Name: "b-c"})
	if a == b {
		t.Errorf("names collide: %s", a)
	}
	if !strings.HasPrefix(a, "vgw-gw-a-b-c-") {
		t.Errorf("name %s is not readable", a)
	}
	long := FragmentName(object.Ref{Name: strings.Repeat("g", 253)}, object.Ref{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("r", 253)})
	for _, n := range []string{a, b, long} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("%s: %v", n, errs)
		}
	}
	first, second := FragmentName(gw, object.Ref{Namespace: "a", Name: "r"}), FragmentName(gw, object.Ref{Namespace: "a", Name: "r"})
	if first != second {
		t.Error("not deterministic")
	}
}

func TestGatewayLabels(t *testing.T) {
	if v := GatewayLabels(object.Ref{Name: "gw"})[GatewayLabel]; v != "gw" {
		t.Errorf("label = %q", v)
	}
	v := GatewayLabels(object.Ref{Name: strings.Repeat("g", 100)})[GatewayLabel]
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		t.Errorf("%s: %v", v, errs)
	}
}
