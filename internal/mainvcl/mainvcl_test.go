package mainvcl

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       Options
		want, not  []string
		classFirst bool
	}{
		{
			name: "preamble only",
			opts: Options{},
			want: []string{"vcl 4.1;", "import ghost;", "import proxy;", `ghost.router("ghost.json", admin_socket = "ghost-admin")`, "router.deliver();",
				"router.sni(proxy.authority());\n\tif (!router.recv()) {", `set req.http.X-Forwarded-Proto = "https";`,
				"sub vcl_backend_fetch {\n\t# The route, its timeout and cache policy travel", "\trouter.backend_fetch();\n}",
				"sub vcl_backend_error {\n\t# A fetch that failed because a timeout ran out", "\trouter.backend_error();\n\t# A route with a retry policy",
				"sub vcl_backend_response {\n\t# A status the route's retry policy", "\tunset bereq.http.X-Ghost-Handoff;\n}", "\tif (router.retry()) {\n\t\treturn (retry);\n\t}\n}",
				"sub vcl_recv {\n\tif (router.cacheable()) {\n\t\treturn (hash);\n\t}\n\treturn (pass);\n}",
				"sub vcl_hash {\n\trouter.hash();\n\treturn (lookup);\n}",
				"sub vcl_backend_response {\n\tif (router.backend_response()) {\n\t\treturn (deliver);\n\t}\n}"},
			not: []string{"# --- GatewayClass VCL", "# --- Gateway VCL"},
		},
		{
			name:       "class then gateway",
			opts:       Options{ClassVCL: "sub vcl_backend_response { set beresp.ttl = 10s; }", GatewayVCL: "sub vcl_deliver { set resp.http.x-gw = \"1\"; }\n"},
			want:       []string{"# --- GatewayClass VCL ---", "# --- Gateway VCL ---", "set beresp.ttl = 10s;", `set resp.http.x-gw = "1";`},
			classFirst: true,
		},
		{
			name: "version line of user VCL dropped",
			opts: Options{GatewayVCL: "vcl 4.1;\nsub vcl_deliver { }"},
			want: []string{"# --- Gateway VCL ---\n\nsub vcl_deliver { }\n"},
		},
		{
			name: "blank user VCL adds nothing",
			opts: Options{ClassVCL: " \n", GatewayVCL: ""},
			not:  []string{"# --- GatewayClass VCL", "# --- Gateway VCL"},
		},
		{
			name: "explicit VMOD and ghost.json",
			opts: Options{VMOD: "/x/libvmod_ghost.so", GhostJSON: "/tmp/g.json"},
			want: []string{`import ghost from "/x/libvmod_ghost.so";`, `ghost.router("/tmp/g.json"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Render(tc.opts)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Render lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("Render has %q:\n%s", n, got)
				}
			}
			if strings.Count(got, "vcl 4.1;") != 1 {
				t.Errorf("Render has %d version lines, want 1", strings.Count(got, "vcl 4.1;"))
			}
			if tc.classFirst && strings.Index(got, "# --- GatewayClass VCL") > strings.Index(got, "# --- Gateway VCL") {
				t.Errorf("class VCL comes after gateway VCL:\n%s", got)
			}
			// the defaults come after all user VCL
			if d := strings.Index(got, "# --- varnishgw defaults"); d < 0 || d < strings.LastIndex(got, "# --- Gateway") {
				t.Errorf("the defaults are missing or before user VCL:\n%s", got)
			}
		})
	}
}

// TestRenderCompiles compiles rendered VCL with the real varnishd and the
// real ghost VMOD (varnishd -C), and checks that broken user VCL fails.
func TestRenderCompiles(t *testing.T) {
	vmod := varnishdtest.GhostVMOD(t)
	bin := varnishdtest.Bin(t)
	dir := varnishdtest.Dir(t)
	compile := func(t *testing.T, src string) (string, error) {
		f := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".vcl")
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "-C", "-n", filepath.Join(dir, "n"), "-f", f).CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"preamble", Options{}, true},
		{"class and gateway VCL", Options{
			ClassVCL:   "vcl 4.1;\nsub vcl_backend_response { set beresp.ttl = 10s; }",
			GatewayVCL: "sub vcl_deliver { set resp.http.x-gateway = \"edge\"; }\nsub vcl_backend_response { set beresp.grace = 1m; }",
		}, true},
		{"broken gateway VCL", Options{GatewayVCL: "sub vcl_deliver { set resp.nope = 1; }"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.VMOD = vmod
			out, err := compile(t, Render(tc.opts))
			if tc.ok && err != nil {
				t.Fatalf("varnishd -C: %v\n%s", err, out)
			}
			if !tc.ok && err == nil {
				t.Fatalf("varnishd -C accepted broken VCL:\n%s", out)
			}
		})
	}
}
