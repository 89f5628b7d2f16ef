package routingsync

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// saveByRename saves like editors do: a temporary file, then a rename
// over the old one.
func saveByRename(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".swp")
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func gatewayYAML(t *testing.T) string {
	gw := testGateway("ns")
	gw.APIVersion, gw.Kind = "gateway.networking.k8s.io/v1", "Gateway"
	b, err := yaml.Marshal(gw)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fragmentJSON(t *testing.T, routeNS, name, host, svcNS, svc string) string {
	t.Helper()
	f, err := routing.Attach(testGateway("ns"), testRoute(routeNS, name, host, svcNS, svc),
		&routing.Objects{Services: []*corev1.Service{service(svcNS, svc)}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := routing.MarshalFragment(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func endpointsYAML(svc string, bs ...backend) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", svc)
	for _, be := range bs {
		fmt.Fprintf(&b, "  - %s:%d\n", be.IP, be.Port)
	}
	return b.String()
}

func TestDirStateErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // in the error; "" for none
	}{
		{"no gateway", map[string]string{}, "no gateway.yaml"},
		{"bad gateway", map[string]string{"gateway.yaml": "spec: {bogus: 1}"}, "gateway.yaml"},
		{"bad fragment", map[string]string{"gateway.yaml": "{}", "r.fragment.json": `{"version": 9}`}, "r.fragment.json"},
		{"bad endpoints key", map[string]string{"gateway.yaml": "{}", "endpoints.yaml": "app:80: [1.2.3.4:80]"}, "want namespace/service:port"},
		{"bad endpoint", map[string]string{"gateway.yaml": "{}", "endpoints.yaml": "ns/app:80: [host:80]"}, "want ip:port"},
		{"unknown kind", map[string]string{"gateway.yaml": "{}", "objects.yaml": "kind: ConfigMap\n"}, `kind "ConfigMap": want Service, EndpointSlice, ReferenceGrant or Secret`},
		{"bad Secret", map[string]string{"gateway.yaml": "{}", "tls.yaml": "kind: Secret\nbogus: 1\n"}, `document 0 (Secret)`},
		{"ignored files", map[string]string{"gateway.yaml": "{}", ".r.fragment.json": "junk", "r.fragment.json~": "junk", "x.swp": "junk"}, ""},
		{"objects and endpoints", map[string]string{"gateway.yaml": "{}",
			"endpoints.yaml": "ns/app:80: ['10.0.0.1:8080', '10.0.0.2:8080', '[fd00::1]:8080', '10.0.0.3:9090']",
			"grants.yaml":    "apiVersion: gateway.networking.k8s.io/v1\nkind: ReferenceGrant\nmetadata: {namespace: ns, name: g}\nspec: {from: [], to: []}\n---\nkind: Service\nmetadata: {namespace: other, name: s}\n"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, c := range tc.files {
				writeFile(t, filepath.Join(dir, n), c)
			}
			st, err := NewDirSource(dir, nil).State()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.name == "objects and endpoints" {
					if len(st.Objects.Services) != 2 || len(st.Objects.ReferenceGrants) != 1 || len(st.Objects.EndpointSlices) != 3 {
						t.Errorf("objects: %d services, %d grants, %d slices", len(st.Objects.Services), len(st.Objects.ReferenceGrants), len(st.Objects.EndpointSlices))
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestDirTrafficMoves edits a standalone directory the way editors do
// (write a temporary file, rename it over the old one) and checks that
// traffic through a real varnishd with ghost follows.
func TestDirTrafficMoves(t *testing.T) {
	g := startGhost(t)
	be := backends(t, "127.0.0.1", "be1", "be2")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "gateway.yaml"), gatewayYAML(t))
	var res results
	s, err := New(Config{Source: NewDirSource(dir, testLogger(t)), Path: g.GhostJSON, Logger: testLogger(t),
		OnResult: res.add, Reloader: ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: g.AdminAddr})})
	if err != nil {
		t.Fatal(err)
	}
	runSyncer(t, s)
	eventually(t, 30*time.Second, "first load", func() error {
		if !s.Loaded() {
			return errNotYet
		}
		return nil
	})
	answers(t, g.HTTPAddr, "a.example.com", 404)

	saveByRename(t, dir, "endpoints.yaml", endpointsYAML("ns/app:80", be["be1"]))
	saveByRename(t, dir, "a.fragment.json", fragmentJSON(t, "ns", "a", "a.example.com", "ns", "app"))
	servedBy(t, g.HTTPAddr, "a.example.com", "be1")

	saveByRename(t, dir, "endpoints.yaml", endpointsYAML("ns/app:80", be["be1"], be["be2"]))
	servedBy(t, g.HTTPAddr, "a.example.com", "be1", "be2")

	// In-place write (truncate + write) works too.
	writeFile(t, filepath.Join(dir, "endpoints.yaml"), endpointsYAML("ns/app:80", be["be2"]))
	servedBy(t, g.HTTPAddr, "a.example.com", "be2")

	// A broken edit keeps the previous routing and is reported.
	saveByRename(t, dir, "a.fragment.json", "{broken")
	res.waitFor(t, "invalid reported", func(r Result) bool {
		return r.Outcome == OutcomeInvalid && strings.Contains(r.Err.Error(), "a.fragment.json")
	})
	servedBy(t, g.HTTPAddr, "a.example.com", "be2")

	// Removing the fragment removes the route.
	if err := os.Remove(filepath.Join(dir, "a.fragment.json")); err != nil {
		t.Fatal(err)
	}
	answers(t, g.HTTPAddr, "a.example.com", 404)
}

// configMapVolume writes files the way the kubelet updates a ConfigMap
// volume: a new timestamped directory, a "..data_tmp" symlink to it renamed
// over "..data", and top-level symlinks name → ..data/name.
type configMapVolume struct {
	t   *testing.T
	dir string
	n   int
}

func (v *configMapVolume) update(files map[string]string) {
	t := v.t
	v.n++
	ts := fmt.Sprintf("..2026_11_22_20_00_%02d.%d", v.n, v.n)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for n, c := range files {
		writeFile(t, filepath.Join(v.dir, ts, n), c)
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(v.dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for n := range files {
		link := filepath.Join(v.dir, n)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", n), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDirConfigMapVolumeSwap checks that the "..data" symlink swap of a
// Kubernetes ConfigMap volume moves traffic.
func TestDirConfigMapVolumeSwap(t *testing.T) {
	g := startGhost(t)
	be := backends(t, "127.0.0.1", "be1", "be2")
	v := &configMapVolume{t: t, dir: t.TempDir()}
	files := map[string]string{
		"gateway.yaml":    gatewayYAML(t),
		"a.fragment.json": fragmentJSON(t, "ns", "a", "a.example.com", "ns", "app"),
		"endpoints.yaml":  endpointsYAML("ns/app:80", be["be1"]),
	}
	v.update(files)
	s, err := New(Config{Source: NewDirSource(v.dir, testLogger(t)), Path: g.GhostJSON, Logger: testLogger(t),
		Reloader: ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: g.AdminAddr})})
	if err != nil {
		t.Fatal(err)
	}
	runSyncer(t, s)
	servedBy(t, g.HTTPAddr, "a.example.com", "be1")

	files["endpoints.yaml"] = endpointsYAML("ns/app:80", be["be2"])
	v.update(files)
	servedBy(t, g.HTTPAddr, "a.example.com", "be2")

	files["b.fragment.json"] = fragmentJSON(t, "ns", "b", "b.example.com", "ns", "app")
	v.update(files)
	servedBy(t, g.HTTPAddr, "b.example.com", "be2")
}
