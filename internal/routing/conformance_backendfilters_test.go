package routing

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// headerCase is one http.ExpectedResponse of the suite's
// HTTPRouteRequestHeaderModifier test (which
// HTTPRouteBackendRequestHeaderModifier runs against its own manifest):
// the request sent and what the echo backend must have received.
type headerCase struct {
	pos     string
	path    string
	headers map[string]string
	backend string
	// the request the backend receives
	wantPath    string
	wantHeaders map[string]string
	absent      []string
}

// headerCases extracts the cases of tests/httproute-request-header-modifier.go
// with go/parser (nothing is copied); a field it does not know fails the
// test, so a change of the suite is noticed.
func headerCases(t *testing.T, path string) []headerCase {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	str := func(e ast.Expr) string {
		bl, ok := e.(*ast.BasicLit)
		if !ok || bl.Kind != token.STRING {
			t.Fatalf("%s: not a string literal", fset.Position(e.Pos()))
		}
		s, _ := strconv.Unquote(bl.Value)
		return s
	}
	fields := func(e ast.Expr) map[string]ast.Expr {
		if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
			e = u.X
		}
		cl, ok := e.(*ast.CompositeLit)
		if !ok {
			t.Fatalf("%s: not a composite literal", fset.Position(e.Pos()))
		}
		m := map[string]ast.Expr{}
		for _, el := range cl.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				t.Fatalf("%s: not key: value", fset.Position(el.Pos()))
			}
			if k, ok := kv.Key.(*ast.BasicLit); ok {
				m[str(k)] = kv.Value
			} else {
				m[fmt.Sprint(kv.Key)] = kv.Value
			}
		}
		return m
	}
	request := func(pos string, e ast.Expr) (string, map[string]string) {
		path, headers := "", map[string]string{}
		for k, v := range fields(e) {
			switch k {
			case "Path":
				path = str(v)
			case "Headers":
				for hk, hv := range fields(v) {
					headers[hk] = str(hv)
				}
			default:
				t.Fatalf("%s: Request.%s is not modelled", pos, k)
			}
		}
		return path, headers
	}
	var cases []headerCase
	ast.Inspect(f, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok || !isExpectedResponse(cl) {
			return true
		}
		c := headerCase{pos: fset.Position(cl.Pos()).String()}
		for k, v := range fields(cl) {
			switch k {
			case "Request":
				c.path, c.headers = request(c.pos, v)
			case "ExpectedRequest":
				for ek, ev := range fields(v) {
					switch ek {
					case "Request":
						c.wantPath, c.wantHeaders = request(c.pos, ev)
					case "AbsentHeaders":
						for _, e := range ev.(*ast.CompositeLit).Elts {
							c.absent = append(c.absent, str(e))
						}
					default:
						t.Fatalf("%s: ExpectedRequest.%s is not modelled", c.pos, ek)
					}
				}
			case "Backend":
				sel, ok := v.(*ast.SelectorExpr)
				if !ok || suiteBackends[sel.Sel.Name] == "" {
					t.Fatalf("%s: Backend %s is not modelled", c.pos, fmt.Sprint(v))
				}
				c.backend = suiteBackends[sel.Sel.Name]
			case "Namespace":
			default:
				t.Fatalf("%s: field %s is not modelled", c.pos, k)
			}
		}
		cases = append(cases, c)
		return false
	})
	return cases
}

// echoBackends serves every Service of objs on its own port of 127.0.0.1
// (one EndpointSlice per Service port), answering 200 with X-Service and
// recording the requests it gets.
type echoBackends struct {
	mu   sync.Mutex
	got  []echoRequest
	objs *Objects
}

type echoRequest struct {
	service, path string
	header        http.Header
}

func startEchoBackends(t *testing.T, objs *Objects) *echoBackends {
	t.Helper()
	e := &echoBackends{objs: objs}
	for _, svc := range objs.Services {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		name := svc.Name
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e.mu.Lock()
			e.got = append(e.got, echoRequest{service: name, path: r.URL.RequestURI(), header: r.Header.Clone()})
			e.mu.Unlock()
			w.Header().Set("X-Service", name)
			fmt.Fprintln(w, "echo")
		})}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		port := int32(l.Addr().(*net.TCPAddr).Port)
		for _, p := range svc.Spec.Ports {
			objs.EndpointSlices = append(objs.EndpointSlices, slice(svc.Namespace, svc.Name, svc.Name+"-"+p.Name,
				discoveryv1.AddressTypeIPv4, p.Name, port, ep(nil, "127.0.0.1")))
		}
	}
	return e
}

// last is the request the backends got last.
func (e *echoBackends) last() (echoRequest, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.got) == 0 {
		return echoRequest{}, 0
	}
	return e.got[len(e.got)-1], len(e.got)
}

// serveThroughGhost writes the ghost.json of manifest's routes on the
// suite's same-namespace Gateway and starts varnishd with ghost on it,
// with varnishdtest's minimal main VCL; it returns the listen address.
func serveThroughGhost(t *testing.T, dir, manifest string, objs *Objects, base manifests) string {
	t.Helper()
	return serveThroughGhostVCL(t, dir, manifest, objs, base, func(ghostJSON string) string {
		return varnishdtest.MainVCL(varnishdtest.GhostVMOD(t), ghostJSON)
	})
}

// serveThroughGhostVCL is serveThroughGhost with the main VCL that vcl
// returns for the ghost.json path (mainvcl.Render's for the backend-side
// subroutines, retry's for instance). Every route must be accepted with
// its references resolved.
func serveThroughGhostVCL(t *testing.T, dir, manifest string, objs *Objects, base manifests, vcl func(ghostJSON string) string) string {
	t.Helper()
	m := readManifests(t, filepath.Join(dir, "tests", manifest))
	var gw *gatewayv1.Gateway
	for _, g := range base.gateways {
		if g.Name == "same-namespace" {
			gw = g
		}
	}
	var frags []*Fragment
	for _, r := range m.routes {
		f, err := Attach(gw, r, objs)
		if err != nil || !f.Accepted() || condition(f, gatewayv1.RouteConditionResolvedRefs) != string(gatewayv1.RouteReasonResolvedRefs) {
			t.Fatalf("%s: %v %+v", r.Name, err, f)
		}
		frags = append(frags, f)
	}
	tb, err := Merge(gw, frags)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Resolve(tb, objs)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ghostjson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(varnishdtest.Dir(t), "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(work, "ghost.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	listen := varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		WorkDir:        work,
		Listeners:      []varnishd.Listener{{Name: ghostjson.SocketName(gw.Spec.Listeners[0].Port), Addr: listen}},
		GhostAdminAddr: varnishdtest.FreeAddr(t),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Admin.VCLInline(ctx, "main", vcl(path)); err != nil {
		t.Fatalf("vcl.inline: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	return listen
}

// TestConformanceBackendFiltersThroughGhost replays the suite's
// HTTPRouteBackendRequestHeaderModifier (the requests of
// HTTPRouteRequestHeaderModifier against the manifest whose filters sit on
// the backendRefs) and HTTPRouteRequestHeaderModifierBackendWeights (100
// requests over two weighted backends, each backendRef setting a Backend
// header naming itself) through a real varnishd and ghost, serving the
// ghost.json that Attach, Merge and Resolve write, in front of one echo
// backend per Service: the Service that answers and the request it got.
func TestConformanceBackendFiltersThroughGhost(t *testing.T) {
	dir := conformanceDir(t)
	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(t *testing.T, listen, path string, headers map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+listen+path, nil)
		req.Host = "gateway.example" // the routes have no hostnames
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	t.Run("HTTPRouteBackendRequestHeaderModifier", func(t *testing.T) {
		cases := headerCases(t, filepath.Join(dir, "tests", "httproute-request-header-modifier.go"))
		if len(cases) < 6 {
			t.Fatalf("%d cases extracted from httproute-request-header-modifier.go: the extraction broke", len(cases))
		}
		objs := &Objects{Namespaces: base.namespaces, Services: append([]*corev1.Service{}, base.services...)}
		echo := startEchoBackends(t, objs)
		listen := serveThroughGhost(t, dir, "httproute-request-header-modifier-backend.yaml", objs, base)
		for _, c := range cases {
			where := fmt.Sprintf("%s: GET %s %v", filepath.Base(c.pos), c.path, c.headers)
			_, before := echo.last()
			resp := get(t, listen, c.path, c.headers)
			got, after := echo.last()
			if resp.StatusCode != 200 || after != before+1 {
				t.Errorf("%s: status %d, backend requests %d -> %d", where, resp.StatusCode, before, after)
				continue
			}
			if got.service != c.backend {
				t.Errorf("%s: served by %s, want %s", where, got.service, c.backend)
			}
			if got.path != c.wantPath {
				t.Errorf("%s: backend got path %s, want %s", where, got.path, c.wantPath)
			}
			for h, want := range c.wantHeaders {
				if v := strings.Join(got.header.Values(h), ","); v != want {
					t.Errorf("%s: backend got %s = %q, want %q", where, h, v, want)
				}
			}
			for _, h := range c.absent {
				if v := got.header.Values(h); len(v) > 0 {
					t.Errorf("%s: backend got %s = %q, want it absent", where, h, v)
				}
			}
		}
		t.Logf("%d requests of HTTPRouteBackendRequestHeaderModifier checked through %s and ghost", len(cases), varnishdtest.Bin(t))
	})

	t.Run("HTTPRouteRequestHeaderModifierBackendWeights", func(t *testing.T) {
		objs := &Objects{Namespaces: base.namespaces, Services: append([]*corev1.Service{}, base.services...)}
		echo := startEchoBackends(t, objs)
		listen := serveThroughGhost(t, dir, "httproute-request-header-modifier-backend-weights.yaml", objs, base)
		served := map[string]int{}
		for i := range 100 {
			resp := get(t, listen, "/", nil)
			got, n := echo.last()
			if resp.StatusCode != 200 || n != i+1 {
				t.Fatalf("request %d: status %d, backend requests %d", i, resp.StatusCode, n)
			}
			// the suite's check: one Backend header, naming the backend
			// (its pod name starts with the Service name)
			if b := got.header.Values("Backend"); len(b) != 1 || b[0] != got.service {
				t.Fatalf("request %d: served by %s with Backend %q, want exactly [%s]", i, got.service, b, got.service)
			}
			served[got.service]++
		}
		if len(served) != 2 {
			t.Errorf("100 requests at weights 10/10 served by %v, want both backends", served)
		}
		t.Logf("100 requests of HTTPRouteRequestHeaderModifierBackendWeights through %s and ghost: %v", varnishdtest.Bin(t), served)
	})
}
