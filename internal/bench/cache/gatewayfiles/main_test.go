package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
)

func TestDocument(t *testing.T) {
	ep := ghostjson.Endpoint{Address: "127.0.0.1", Port: 8080}
	for _, tc := range []struct {
		name           string
		vhosts, routes int
		policy         bool
	}{
		{name: "10,000 routes, passed", vhosts: 1000, routes: 10},
		{name: "10,000 routes with a policy", vhosts: 1000, routes: 10, policy: true},
		{name: "one route", vhosts: 1, routes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Document(tc.vhosts, tc.routes, ep, tc.policy)
			data, err := ghostjson.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ghostjson.Unmarshal(data)
			if err != nil {
				t.Fatalf("the written ghost.json does not read back: %v", err)
			}
			n, cached := 0, 0
			for _, vh := range back.VHosts {
				if len(vh.Listeners) != 1 || vh.Listeners[0] != Socket {
					t.Fatalf("vhost %s on %v, want [%s]", vh.Hostname, vh.Listeners, Socket)
				}
				for _, r := range vh.Routes {
					n++
					if r.Cache != "" {
						cached++
					}
				}
			}
			if n != tc.vhosts*tc.routes {
				t.Errorf("%d routes, want %d", n, tc.vhosts*tc.routes)
			}
			if want := map[bool]int{true: n, false: 0}[tc.policy]; cached != want || (len(back.CachePolicies) == 1) != tc.policy {
				t.Errorf("%d routes name a policy of %d, want %d", cached, len(back.CachePolicies), want)
			}
			// The benchmark's request, GET /p7 on the last vhost, has a route.
			if tc.routes > 7 && back.VHosts[len(back.VHosts)-1].Routes[7].Match.Path.Value != "/p7" {
				t.Errorf("route 7 of the last vhost matches %+v, want PathPrefix /p7", back.VHosts[len(back.VHosts)-1].Routes[7].Match.Path)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir, "127.0.0.1:8080", "/x/libvmod_ghost.so", 2, 3); err != nil {
		t.Fatal(err)
	}
	vcl, err := os.ReadFile(filepath.Join(dir, "uservcl", "main.vcl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(vcl), UserCacheVCL) || !strings.Contains(string(vcl), `import ghost from "/x/libvmod_ghost.so";`) ||
		!strings.Contains(string(vcl), filepath.Join(dir, "uservcl", "ghost.json")) {
		t.Errorf("uservcl/main.vcl does not import the VMOD, name its ghost.json and hold the Gateway VCL:\n%s", vcl)
	}
	pass, err := os.ReadFile(filepath.Join(dir, "pass", "main.vcl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(pass), "# --- Gateway VCL ---") || strings.Contains(string(pass), UserCacheVCL) {
		t.Errorf("pass/main.vcl has user VCL:\n%s", pass)
	}
	// policy/ exactly when main.vcl's defaults consult the policy.
	_, err = os.Stat(filepath.Join(dir, "policy", "ghost.json"))
	if supported := PolicyVCL(mainvcl.Render(mainvcl.Options{})); supported != (err == nil) {
		t.Errorf("policy/ written: %v (%v), want %v", err == nil, err, supported)
	}
	for _, bad := range []struct{ origin, want string }{
		{"localhost", "want IP:PORT"},
		{"127.0.0.1:0", "is not 1-65535"},
	} {
		if err := write(t.TempDir(), bad.origin, "/x.so", 1, 1); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("write with -origin %s: %v, want an error saying %q", bad.origin, err, bad.want)
		}
	}
}

func TestPolicyVCL(t *testing.T) {
	for _, tc := range []struct {
		vcl  string
		want bool
	}{
		{"sub vcl_recv {\n\treturn (pass);\n}\n", false},
		{"sub vcl_recv {\n\tif (router.cacheable()) {\n\t\treturn (hash);\n\t}\n\treturn (pass);\n}\n", true},
	} {
		if got := PolicyVCL(tc.vcl); got != tc.want {
			t.Errorf("PolicyVCL(%q) = %v, want %v", tc.vcl, got, tc.want)
		}
	}
}
