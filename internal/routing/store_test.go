package routing

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestFragmentConfigMapName(t *testing.T) {
	gw := ObjectRef{Namespace: "infra", Name: "gw"}
	a := FragmentConfigMapName(gw, ObjectRef{Namespace: "a-b", Name: "c"})
	b := FragmentConfigMapName(gw, ObjectRef{Namespace: "a", Name: "b-c"})
	if a == b {
		t.Errorf("names collide: %s", a)
	}
	if !strings.HasPrefix(a, "vgw-gw-a-b-c-") {
		t.Errorf("name %s is not readable", a)
	}
	long := FragmentConfigMapName(ObjectRef{Name: strings.Repeat("g", 253)}, ObjectRef{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("r", 253)})
	for _, n := range []string{a, b, long} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("%s: %v", n, errs)
		}
	}
	if FragmentConfigMapName(gw, ObjectRef{Namespace: "a", Name: "r"}) != FragmentConfigMapName(gw, ObjectRef{Namespace: "a", Name: "r"}) {
		t.Error("not deterministic")
	}
}

func TestFragmentLabels(t *testing.T) {
	if v := FragmentLabels(ObjectRef{Name: "gw"})[FragmentGatewayLabel]; v != "gw" {
		t.Errorf("label = %q", v)
	}
	v := FragmentLabels(ObjectRef{Name: strings.Repeat("g", 100)})[FragmentGatewayLabel]
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		t.Errorf("%s: %v", v, errs)
	}
}

func TestListenerAttachedRoutes(t *testing.T) {
	gw := gateway(listener("a", 80, ""), listener("b", 8080, "x.org"))
	frags := attachAll(t, gw, nil, route("infra", "r1"), route("infra", "r2", section("b")), route("other", "denied"))
	got := ListenerAttachedRoutes(frags)
	if got["a"] != 1 || got["b"] != 2 || len(got) != 2 {
		t.Errorf("attached = %v", got)
	}
}
