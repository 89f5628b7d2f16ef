package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want string
	}{
		{0, "0s"}, {500, "500ms"}, {10000, "10s"}, {120000, "2m"}, {90000, "1m30s"},
		{5400000, "1h30m"}, {86400000, "24h"}, {3723004, "1h2m3s4ms"},
	} {
		if got := formatDuration(tc.ms); got != tc.want {
			t.Errorf("formatDuration(%d) = %q, want %q", tc.ms, got, tc.want)
		}
		// What it writes is a Gateway API duration.
		if !routing.DurationPattern.MatchString(formatDuration(tc.ms)) {
			t.Errorf("formatDuration(%d) = %q is not a Gateway API duration", tc.ms, formatDuration(tc.ms))
		}
	}
}

// TestCachePolicyModelRoundTrip: a block becomes the annotation's policy
// and reads back the same, null and empty lists kept apart.
func TestCachePolicyModelRoundTrip(t *testing.T) {
	empty := types.ListValueMust(types.StringType, nil)
	for _, tc := range []struct {
		name string
		m    *cachePolicyModel
		want string // the annotation
	}{
		{"absent", nil, ""},
		{"empty block", cachePolicyModelOf(&routing.CachePolicy{}), "{}"},
		{"include nothing", func() *cachePolicyModel {
			m := cachePolicyModelOf(&routing.CachePolicy{})
			m.QueryParametersInclude = empty
			return m
		}(), `{"queryParametersInclude":[]}`},
		{"every argument", cachePolicyModelOf(&routing.CachePolicy{
			Enabled: ptrTo(true), TTL: ptrTo("1h"), ForceTTL: ptrTo(false), Grace: ptrTo("1m"), Keep: ptrTo("0s"),
			QueryParametersExclude: &[]string{"utm_source"}, KeyHeaders: &[]string{"Accept"}, StripCookies: &[]string{"*"},
			AllowAuthorization: ptrTo(true), TagHeader: ptrTo(""), StatusHeader: ptrTo("X-Cache"),
		}), `{"enabled":true,"ttl":"1h","forceTtl":false,"grace":"1m","keep":"0s","queryParametersExclude":["utm_source"],` +
			`"keyHeaders":["Accept"],"stripCookies":["*"],"allowAuthorization":true,"tagHeader":"","statusHeader":"X-Cache"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := gatewayCacheAnnotation(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("annotation %s, want %s", got, tc.want)
			}
			if got == "" {
				return
			}
			gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{routing.CachePolicyAnnotation: got}}}
			p, err := routing.GatewayCachePolicy(gw)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.m, cachePolicyModelOf(p)); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
		})
	}
	// A block the routing core rejects never becomes an annotation.
	bad := cachePolicyModelOf(&routing.CachePolicy{TTL: ptrTo("2 minutes")})
	if _, err := gatewayCacheAnnotation(bad); err == nil {
		t.Error("an invalid ttl made an annotation")
	}
}

// TestRecordedPolicies: the private state record gives the policies only
// when it covers every accepted fragment's Gateway.
func TestRecordedPolicies(t *testing.T) {
	gwA := object.Ref{Namespace: "infra", Name: "a"}
	gwB := object.Ref{Namespace: "infra", Name: "b"}
	accepted := func(gw object.Ref) *routing.Fragment {
		return &routing.Fragment{Gateway: gw, Listeners: []routing.AttachedListener{{Name: "http", Port: 80, Hostnames: []string{"*"}}},
			Rules: []routing.Rule{{Index: 0}, {Index: 1, Cache: &routing.CachePolicy{Enabled: ptrTo(false)}}}}
	}
	notAccepted := &routing.Fragment{Gateway: gwB}
	record := []byte(`{"infra/a":"{\"ttl\":\"5m\"}","infra/c":""}`)
	for _, tc := range []struct {
		name   string
		record []byte
		frags  []*routing.Fragment
		ok     bool
	}{
		{"no record", nil, []*routing.Fragment{accepted(gwA)}, false},
		{"covered", record, []*routing.Fragment{accepted(gwA), notAccepted}, true},
		{"a Gateway not recorded", record, []*routing.Fragment{accepted(gwA), accepted(gwB)}, false},
		{"corrupt", []byte(`{`), []*routing.Fragment{accepted(gwA)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policies, ok := recordedPolicies(tc.record, tc.frags)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			list := effectiveCache(tc.frags, policies)
			if n := len(list.Elements()); n != 2 {
				t.Fatalf("%d elements, want the 2 rules of the accepted fragment: %v", n, list)
			}
			first := list.Elements()[0].(types.Object).Attributes()
			second := list.Elements()[1].(types.Object).Attributes()
			if first["ttl"].(types.String).ValueString() != "5m" || first["gateway"].(types.String).ValueString() != "infra/a" ||
				second["cached"].(types.Bool).ValueBool() || !second["ttl"].IsNull() {
				t.Errorf("effective_cache %v", list)
			}
		})
	}
}
