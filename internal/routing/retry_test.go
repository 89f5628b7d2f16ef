package routing

import (
	"reflect"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

func TestNormalizeRetry(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *gatewayv1.HTTPRouteRetry
		want *ghostjson.Retry
	}{
		{"none", nil, nil},
		{"defaults", &gatewayv1.HTTPRouteRetry{}, &ghostjson.Retry{Attempts: DefaultRetryAttempts}},
		{"all", &gatewayv1.HTTPRouteRetry{Attempts: ptr(3), Backoff: ptr(gatewayv1.Duration("1s500ms")),
			Codes: []gatewayv1.HTTPRouteRetryStatusCode{503, 500}},
			&ghostjson.Retry{Attempts: 3, BackoffMs: 1500, Codes: []int{503, 500}}},
		{"zero backoff", &gatewayv1.HTTPRouteRetry{Attempts: ptr(2), Backoff: ptr(gatewayv1.Duration("0s"))}, &ghostjson.Retry{Attempts: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := normalizeRetry(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("normalizeRetry = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRetryThroughFragment: a rule's retry reaches the fragment (version
// 3, which chaperones that predate retries reject) and ghost.json, valid
// against ghost.schema.json; a fragment of an older version that has one
// is invalid, and so is a bad policy in a hand-edited fragment.
func TestRetryThroughFragment(t *testing.T) {
	gw := gateway(listener("http", 80, ""))
	r := route("infra", "r", rules(
		gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/a")}, BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil)},
			Retry: &gatewayv1.HTTPRouteRetry{Attempts: ptr(3), Backoff: ptr(gatewayv1.Duration("100ms")), Codes: []gatewayv1.HTTPRouteRetryStatusCode{500, 502}}},
		gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/b")}, BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil)}},
	))
	f, err := Attach(gw, r, nil)
	if err != nil || !f.Accepted() {
		t.Fatalf("%v %+v", err, f)
	}
	want := &ghostjson.Retry{Attempts: 3, BackoffMs: 100, Codes: []int{500, 502}}
	if !reflect.DeepEqual(f.Rules[0].Retry, want) || f.Rules[1].Retry != nil {
		t.Fatalf("rules' retry %+v, %+v; want %+v, nil", f.Rules[0].Retry, f.Rules[1].Retry, want)
	}
	data, err := MarshalFragment(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalFragment(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Version != FragmentVersion || !reflect.DeepEqual(back.Rules[0].Retry, want) {
		t.Errorf("round trip: version %d, retry %+v", back.Version, back.Rules[0].Retry)
	}
	for _, tc := range []struct {
		name, from, to, wantErr string
	}{
		{"attempts 0", `"attempts": 3`, `"attempts": 0`, `rules[0].retry.attempts: Invalid value: 0: must be from 1 to 100`},
		{"code 302", `500,`, `302,`, `rules[0].retry.codes[0]: Invalid value: 302: must be an HTTP status from 400 to 599`},
		{"negative backoff", `"backoffMs": 100`, `"backoffMs": -1`, `rules[0].retry.backoffMs: Invalid value: -1`},
		{"unknown field", `"attempts": 3`, `"attempts": 3, "perTryTimeout": 1`, `unknown field "perTryTimeout"`},
	} {
		bad := strings.Replace(string(data), tc.from, tc.to, 1)
		if bad == string(data) {
			t.Fatalf("%s: %q not in the fragment:\n%s", tc.name, tc.from, data)
		}
		if _, err := UnmarshalFragment([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.wantErr)
		}
	}

	tb, err := Merge(gw, []*Fragment{back})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Resolve(tb, nil)
	if err != nil {
		t.Fatal(err)
	}
	js, err := ghostjson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, ghostSchema(t), js)
	got := map[string]*ghostjson.Retry{}
	for _, rt := range doc.VHosts[0].Routes {
		got[rt.Match.Path.Value] = rt.Retry
	}
	if !reflect.DeepEqual(got, map[string]*ghostjson.Retry{"/a": want, "/b": nil}) {
		t.Errorf("ghost.json retries by path: %v", got)
	}
	if !strings.Contains(string(js), `"retry":{"attempts":3,"backoffMs":100,"codes":[500,502]}`) {
		t.Errorf("ghost.json lacks the retry:\n%s", js)
	}

	// a rule with backendRef filters cannot have one, in a fragment too
	back.Rules[0].Backends[0].Filters = []Filter{{Type: ghostjson.FilterRequestHeaderModifier,
		RequestHeaderModifier: &ghostjson.HeaderModifier{Set: []ghostjson.HeaderValue{{Name: "X", Value: "1"}}}}}
	if err := back.Validate(); err == nil || !strings.Contains(err.Error(), "rules[0].retry: Forbidden: a rule with a retry policy cannot have backendRefs with filters") {
		t.Errorf("retry with backendRef filters: %v", err)
	}
}
