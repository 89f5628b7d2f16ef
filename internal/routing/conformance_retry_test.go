package routing

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/retrysim"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// TestConformanceRetryThroughGhost replays the suite's HTTPRouteRetry
// (v1.6.3: codes 500 with attempts 3, codes 500 to 504 with attempts 2)
// through a real varnishd and ghost with the rendered main.vcl, serving
// the ghost.json that Attach, Merge and Resolve write, in front of an
// imitation of the echo backend's retry simulation (retrysim, which the
// chaperone's TestConformanceReplay uses too): each case gets the
// status the suite wants, and the backend sees exactly the requests the
// policy allows (the first plus the retries, at most attempts of them).
func TestConformanceRetryThroughGhost(t *testing.T) {
	dir := conformanceDir(t)
	cases, err := retrysim.Cases(filepath.Join(dir, "tests", "httproute-retry.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 11 {
		t.Fatalf("%d cases extracted from httproute-retry.go: the extraction broke", len(cases))
	}
	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	m := readManifests(t, filepath.Join(dir, "tests", "httproute-retry.yaml"))
	attempts := map[string]int{}
	retried := map[string]map[int]bool{}
	for _, r := range m.routes {
		for _, rule := range r.Spec.Rules {
			if rule.Retry == nil || rule.Retry.Attempts == nil || len(rule.Matches) != 1 {
				t.Fatalf("%s: a rule without retry attempts or with several matches", r.Name)
			}
			path := *rule.Matches[0].Path.Value
			attempts[path] = *rule.Retry.Attempts
			retried[path] = map[int]bool{}
			for _, c := range rule.Retry.Codes {
				retried[path][int(c)] = true
			}
		}
	}

	be := retrysim.New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "echo") }))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: be}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := int32(l.Addr().(*net.TCPAddr).Port)
	objs := &Objects{Namespaces: base.namespaces, Services: base.services}
	for _, svc := range base.services {
		for _, p := range svc.Spec.Ports {
			objs.EndpointSlices = append(objs.EndpointSlices, slice(svc.Namespace, svc.Name, svc.Name+"-"+p.Name,
				discoveryv1.AddressTypeIPv4, p.Name, port, ep(nil, "127.0.0.1")))
		}
	}
	listen := serveThroughGhostVCL(t, dir, "httproute-retry.yaml", objs, base, func(ghostJSON string) string {
		return mainvcl.Render(mainvcl.Options{VMOD: varnishdtest.GhostVMOD(t), GhostJSON: ghostJSON})
	})

	client := &http.Client{Timeout: 10 * time.Second}
	for i, c := range cases {
		uuid := fmt.Sprintf("case-%d", i)
		req, _ := http.NewRequest("GET", "http://"+listen+c.Path+"?"+c.Query(uuid), nil)
		req.Host = "gateway.example" // the route has no hostnames
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.Want {
			t.Errorf("%s (%s): status %d, want %d", c.Name, filepath.Base(c.Pos), resp.StatusCode, c.Want)
		}
		// the first request, then one retry per failure until a success
		// or the attempts run out
		a, ok := attempts[c.Path]
		if !ok {
			t.Fatalf("%s: no rule for %s", c.Name, c.Path)
		}
		want := 1
		if retried[c.Path][c.Code] {
			want += min(c.SucceedAfter, a)
		}
		if got := be.Requests(uuid); got != want {
			t.Errorf("%s: the backend got %d requests, want %d (attempts %d)", c.Name, got, want, a)
		}
	}
	t.Logf("%d requests of HTTPRouteRetry checked through %s and ghost", len(cases), varnishdtest.Bin(t))
}
