package ghostjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func sample() *Document {
	eps := []Endpoint{{Address: "10.0.0.1", Port: 8080}, {Address: "fd00::1", Port: 8080}}
	pct := int32(10)
	filters := []Filter{
		{Type: FilterRequestHeaderModifier, RequestHeaderModifier: &HeaderModifier{Set: []HeaderValue{{Name: "X-A", Value: "a\"b\\c\n\u2028\x01é"}}, Remove: []string{"X-B"}}},
		{Type: FilterRequestMirror, RequestMirror: &Mirror{Backend: BackendGroup{Name: "m", Weight: 1, Endpoints: []Endpoint{}}, Percent: &pct}},
	}
	return &Document{Version: Version, VHosts: []VHost{
		{Hostname: "*", Listeners: []string{"port-80", "port-8080"}, Routes: []Route{
			{Name: "a/b/0/0", Match: Match{Path: PathMatch{Type: PathPrefix, Value: "/"}, Method: "GET",
				Headers:     []ValueMatch{{Type: "Exact", Name: "x", Value: "1"}},
				QueryParams: []ValueMatch{{Type: "RegularExpression", Name: "q", Value: `^\d+$`}}},
				Filters: filters, Timeouts: &Timeouts{RequestMs: 1000, BackendRequestMs: 500},
				Backends: []BackendGroup{{Name: "a/web:80", Weight: 3, Endpoints: eps}, {Name: "a/gone:80", Weight: 1, Endpoints: []Endpoint{}}}},
			{PrecedenceGroup: 2, Match: Match{Path: PathMatch{Type: PathExact, Value: "/x"}}, Filters: filters, Timeouts: &Timeouts{BackendRequestMs: 5},
				Backends: []BackendGroup{{Weight: 0, Endpoints: eps}}},
		}},
		{Hostname: "a.example.com", Routes: []Route{}},
	}}
}

// TestMarshalMatchesEncodingJSON checks that the hand-written encoder
// produces JSON that decodes to the same document.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	d := sample()
	out, err := Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, d) {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(d)
		t.Fatalf("round trip differs:\n%s\n%s", a, b)
	}
	if !strings.Contains(string(out), "\n        {\"name\":\"a/b/0/0\",") {
		t.Errorf("route not on its own line:\n%s", out)
	}
	if !strings.Contains(string(out), "\n        {\"precedenceGroup\":2,\"match\":") ||
		strings.Count(string(out), "precedenceGroup") != 1 {
		t.Errorf("precedenceGroup must be written only when not 0:\n%s", out)
	}
	again, _ := Marshal(d)
	if string(again) != string(out) {
		t.Error("output not deterministic")
	}
	var buf bytes.Buffer
	if err := Encode(&buf, d); err != nil || buf.String() != string(out) {
		t.Errorf("Encode differs from Marshal: %v", err)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\", "\x00\x1f\x7f", "é\u2028\u2029", "\xff\xfe", "a\tb\r\n"} {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(string(want), `\u003c`, "<"), `\u003e`, ">"), `\u0026`, "&") {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestMarshalEmpty(t *testing.T) {
	out, err := Marshal(&Document{Version: Version})
	if err != nil || string(out) != "{\n  \"version\": 1,\n  \"vhosts\": []\n}\n" {
		t.Fatalf("%q %v", out, err)
	}
	if _, err := Marshal(&Document{Version: 2}); err == nil {
		t.Error("version 2 accepted")
	}
}
