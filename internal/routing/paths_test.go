package routing

import (
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// TestEscapedSlashes checks the Gateway's escaped-slashes annotation on its
// way into ghost.json: absent or reject writes nothing (ghost's default
// answers %2F and %5C with 400), keep writes "escapedSlashes": "keep", and
// another value fails Merge naming the annotation, the value and the fix,
// so that the routing served so far stays.
func TestEscapedSlashes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation *string
		want       string // in ghost.json; "" none
		wantErr    string
	}{
		{name: "absent"},
		{name: "reject", annotation: ptr("reject")},
		{name: "keep", annotation: ptr("keep"), want: `"escapedSlashes": "keep"`},
		{name: "unknown", annotation: ptr("decode"), wantErr: `the annotation varnishgw.dev/escaped-slashes of Gateway infra/gw is "decode": want "reject" or "keep"; fix the gateway's escaped_slashes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := gateway(listener("http", 80, ""))
			if tc.annotation != nil {
				gw.Annotations = map[string]string{EscapedSlashesAnnotation: *tc.annotation}
			}
			tb, err := Merge(gw, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Merge error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			doc, err := Resolve(tb, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := ghostjson.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			checkSchema(t, ghostSchema(t), out)
			if got := strings.Contains(string(out), "escapedSlashes"); got != (tc.want != "") || (tc.want != "" && !strings.Contains(string(out), tc.want)) {
				t.Errorf("ghost.json:\n%s\nwant escapedSlashes %q", out, tc.want)
			}
		})
	}
}
