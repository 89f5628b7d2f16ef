package gwruntime

import (
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestRuntimeNames(t *testing.T) {
	long := strings.Repeat("a", 60)
	tests := []struct {
		gw       routing.ObjectRef
		runtime  string
		backends string
	}{
		{routing.ObjectRef{Namespace: "gateways", Name: "public"}, "varnishgw-public", "varnishgw-backends-gateways-public"},
		{routing.ObjectRef{Namespace: "ns", Name: "with.dots"}, "vgw-with-dots-", "varnishgw-backends-ns-with-dots-"},
		{routing.ObjectRef{Namespace: "ns", Name: long}, "vgw-" + long[:48] + "-", "varnishgw-backends-ns-" + long},
		{routing.ObjectRef{Namespace: "ns", Name: "9lives"}, "varnishgw-9lives", "varnishgw-backends-ns-9lives"},
	}
	for _, tt := range tests {
		t.Run(tt.gw.String(), func(t *testing.T) {
			rt := Name(tt.gw)
			if !strings.HasPrefix(rt, tt.runtime) {
				t.Errorf("RuntimeName = %q, want prefix %q", rt, tt.runtime)
			}
			if errs := validation.IsDNS1035Label(rt); len(errs) > 0 {
				t.Errorf("RuntimeName %q is not a Service name: %v", rt, errs)
			}
			if errs := validation.IsDNS1123Subdomain(VCLConfigMapName(tt.gw)); len(errs) > 0 {
				t.Errorf("VCLConfigMapName %q: %v", VCLConfigMapName(tt.gw), errs)
			}
			br := BackendClusterRoleName(tt.gw)
			if !strings.HasPrefix(br, tt.backends) || len(br) > 253 {
				t.Errorf("BackendClusterRoleName = %q, want prefix %q", br, tt.backends)
			}
			for k, v := range Labels(tt.gw) {
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					t.Errorf("label %s=%q: %v", k, v, errs)
				}
			}
		})
	}
	// Names differing only in characters the readable part drops stay apart.
	a, b := Name(routing.ObjectRef{Namespace: "ns", Name: "a.b"}), Name(routing.ObjectRef{Namespace: "ns", Name: "a-b.x"})
	if a == b || Name(routing.ObjectRef{Namespace: "ns", Name: "x.y"}) == Name(routing.ObjectRef{Namespace: "ns", Name: "x_y"}) {
		t.Errorf("names collide: %q %q", a, b)
	}
}
