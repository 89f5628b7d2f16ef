package invalidation

import (
	"reflect"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

func TestBans(t *testing.T) {
	q := func(s string) *string { return &s }
	const h, host = "obj.http.X-Ghost-Host", "www.example.com"
	for _, tc := range []struct {
		name string
		spec vgwapi.InvalidationSpec
		want [][]string
	}{
		{"purge a path, any query", vgwapi.InvalidationSpec{Purges: []vgwapi.Purge{{Host: host, Path: "/a b"}}},
			[][]string{{h, "==", host, "&&", "obj.http.X-Ghost-Path", "==", "/a b"}}},
		{"purge with query", vgwapi.InvalidationSpec{Purges: []vgwapi.Purge{{Host: host, Path: "/a", Query: q(`x="1"`)}}},
			[][]string{{h, "==", host, "&&", "obj.http.X-Ghost-Url", "==", `/a?x="1"`}}},
		{"purge without query only", vgwapi.InvalidationSpec{Purges: []vgwapi.Purge{{Host: host, Path: "/a", Query: q("")}}},
			[][]string{{h, "==", host, "&&", "obj.http.X-Ghost-Url", "==", "/a"}}},
		{"prefix regex-quoted", vgwapi.InvalidationSpec{Bans: []vgwapi.Ban{{Host: host, PathPrefix: "/a.b+(c)/"}}},
			[][]string{{h, "==", host, "&&", "obj.http.X-Ghost-Path", "~", `^/a\.b\+\(c\)/`}}},
		{"regex as given", vgwapi.InvalidationSpec{Bans: []vgwapi.Ban{{Host: host, PathRegex: `\.png$`}}},
			[][]string{{h, "==", host, "&&", "obj.http.X-Ghost-Path", "~", `\.png$`}}},
		{"regex spaces as \\x20", vgwapi.InvalidationSpec{Bans: []vgwapi.Ban{{Host: host, PathRegex: `^/a b/[ ]`}}},
			[][]string{{h, "==", host, "&&", "obj.http.X-Ghost-Path", "~", `^/a\x20b/[\x20]`}}},
		{"tag as a whole word, regex-quoted", vgwapi.InvalidationSpec{Tags: []string{"a.b*"}},
			[][]string{{"obj.http.X-Ghost-Tags", "~", `(^|\x20)a\.b\*(\x20|$)`}}},
		{"order: purges, bans, tags", vgwapi.InvalidationSpec{
			Tags: []string{"t"}, Bans: []vgwapi.Ban{{Host: host, PathPrefix: "/"}}, Purges: []vgwapi.Purge{{Host: host, Path: "/"}},
		}, [][]string{
			{h, "==", host, "&&", "obj.http.X-Ghost-Path", "==", "/"},
			{h, "==", host, "&&", "obj.http.X-Ghost-Path", "~", "^/"},
			{"obj.http.X-Ghost-Tags", "~", `(^|\x20)t(\x20|$)`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Bans(&tc.spec); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Bans = %q\nwant %q", got, tc.want)
			}
		})
	}
}
