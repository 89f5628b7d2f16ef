package routing

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// suiteCase is one http.ExpectedResponse literal of a conformance test.
type suiteCase struct {
	pos     string // file:line
	gateway string // the Gateway the test sends it to (latest gwNN before it)
	req     simRequest
	backend string // expected Service name, or ""
	status  int    // expected status (200 when a backend is expected)
}

var suiteBackends = map[string]string{
	"InfraBackendServiceNameV1": "infra-backend-v1",
	"InfraBackendServiceNameV2": "infra-backend-v2",
	"InfraBackendServiceNameV3": "infra-backend-v3",
}

// suiteCases extracts the ExpectedResponse literals of a conformance test
// file with go/parser. Literals with fields that are not plain literals
// (or a field this model does not cover) are counted as skipped.
func suiteCases(t *testing.T, path string) (cases []suiteCase, skipped int) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	str := func(e ast.Expr) (string, bool) {
		if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			s, err := strconv.Unquote(bl.Value)
			return s, err == nil
		}
		return "", false
	}
	gateway := ""
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			// gwNN := types.NamespacedName{Name: "...", ...}
			if id, ok := n.Lhs[0].(*ast.Ident); ok && strings.HasPrefix(id.Name, "gw") && len(n.Rhs) == 1 {
				if cl, ok := n.Rhs[0].(*ast.CompositeLit); ok {
					for _, el := range cl.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok && fmt.Sprint(kv.Key) == "Name" {
							if s, ok := str(kv.Value); ok {
								gateway = s
							}
						}
					}
				}
			}
		case *ast.CompositeLit:
			if !isExpectedResponse(n) {
				return true
			}
			c := suiteCase{pos: fset.Position(n.Pos()).String(), gateway: gateway, req: simRequest{Method: "GET"}}
			ok := true
			for _, el := range n.Elts {
				kv, isKV := el.(*ast.KeyValueExpr)
				if !isKV {
					ok = false
					continue
				}
				switch fmt.Sprint(kv.Key) {
				case "Request":
					ok = ok && suiteRequest(kv.Value, &c.req, str)
				case "Backend":
					if sel, isSel := kv.Value.(*ast.SelectorExpr); isSel && suiteBackends[sel.Sel.Name] != "" {
						c.backend = suiteBackends[sel.Sel.Name]
					} else if s, isStr := str(kv.Value); isStr {
						c.backend = s
					} else {
						ok = false
					}
				case "Response":
					cl, isCL := kv.Value.(*ast.CompositeLit)
					if !isCL {
						ok = false
						continue
					}
					for _, re := range cl.Elts {
						rkv, isKV := re.(*ast.KeyValueExpr)
						if !isKV || fmt.Sprint(rkv.Key) != "StatusCode" {
							ok = false // headers, absent headers, ...: not modelled
							continue
						}
						bl, isLit := rkv.Value.(*ast.BasicLit)
						if !isLit {
							ok = false
							continue
						}
						c.status, _ = strconv.Atoi(bl.Value)
					}
				case "Namespace":
				default:
					ok = false // ExpectedRequest, RedirectRequest, ...
				}
			}
			if c.status == 0 {
				c.status = 200
			}
			if c.req.Host == "" {
				c.req.Host = "192.0.2.1" // the Gateway address: only a "*" vhost takes it
			}
			if !ok || (c.status != 200 && c.status != 404 && c.status != 500) || (c.status == 200) != (c.backend != "") {
				if testing.Verbose() {
					t.Logf("skip %s: ok=%v host=%q status=%d backend=%q", c.pos, ok, c.req.Host, c.status, c.backend)
				}
				skipped++
				return false
			}
			cases = append(cases, c)
			return false
		}
		return true
	})
	return cases, skipped
}

func isExpectedResponse(cl *ast.CompositeLit) bool {
	if sel, ok := cl.Type.(*ast.SelectorExpr); ok {
		return sel.Sel.Name == "ExpectedResponse"
	}
	if cl.Type != nil {
		return false
	}
	// An element of []http.ExpectedResponse{...}: recognised by its fields.
	for _, el := range cl.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok && fmt.Sprint(kv.Key) == "Request" {
			return true
		}
	}
	return false
}

func suiteRequest(e ast.Expr, r *simRequest, str func(ast.Expr) (string, bool)) bool {
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return false
	}
	for _, el := range cl.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			return false
		}
		switch fmt.Sprint(kv.Key) {
		case "Host":
			r.Host, ok = str(kv.Value)
		case "Path":
			r.Path, ok = str(kv.Value)
		case "Method":
			r.Method, ok = str(kv.Value)
		case "Headers":
			m, isMap := kv.Value.(*ast.CompositeLit)
			if !isMap {
				return false
			}
			r.Headers = map[string]string{}
			for _, he := range m.Elts {
				hkv, isKV := he.(*ast.KeyValueExpr)
				if !isKV {
					return false
				}
				k, ok1 := str(hkv.Key)
				v, ok2 := str(hkv.Value)
				if !ok1 || !ok2 {
					return false
				}
				r.Headers[k] = v
			}
		default:
			return false // Protocol, UnfollowRedirect, ...
		}
		if !ok {
			return false
		}
	}
	return true
}

// TestConformanceRequests replays the HTTP requests of the suite's HTTPRoute
// tests (extracted from tests/httproute-*.go with go/parser, never copied)
// against the ghost.json that Attach, Merge and Resolve produce for the
// test's manifests, using the reference model of ghost's lookup: each
// request must reach the expected Service, or get 404. Cases outside the
// model (redirects, rewrites, weights, response headers, requests built in
// code) are skipped and counted.
func TestConformanceRequests(t *testing.T) {
	dir := conformanceDir(t)
	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	files, _ := filepath.Glob(filepath.Join(dir, "tests", "httproute-*.go"))
	checked, skipped := 0, 0
	for _, goFile := range files {
		yamlFile := strings.TrimSuffix(goFile, ".go") + ".yaml"
		cases, sk := suiteCases(t, goFile)
		skipped += sk
		if len(cases) == 0 {
			continue
		}
		m := readManifests(t, yamlFile)
		objs := &Objects{
			Namespaces:      append(append([]*corev1.Namespace{}, base.namespaces...), m.namespaces...),
			Services:        append(append([]*corev1.Service{}, base.services...), m.services...),
			ReferenceGrants: m.grants,
		}
		// One ready endpoint per Service port, as the suite's Deployments give.
		for i, svc := range objs.Services {
			for _, p := range svc.Spec.Ports {
				objs.EndpointSlices = append(objs.EndpointSlices, slice(svc.Namespace, svc.Name, svc.Name+"-"+p.Name,
					discoveryv1.AddressTypeIPv4, p.Name, p.TargetPort.IntVal, ep(nil, fmt.Sprintf("10.1.%d.1", i))))
			}
		}
		docs := map[string]*ghostjson.Document{}
		ports := map[string]int32{}
		gwPorts := map[string][]int32{}
		for _, gw := range append(append([]*gatewayv1.Gateway{}, base.gateways...), m.gateways...) {
			var frags []*Fragment
			for _, r := range m.routes {
				if f, err := Attach(gw, r, objs); err == nil {
					frags = append(frags, f)
				}
			}
			tb, err := Merge(gw, frags)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := Resolve(tb, objs)
			if err != nil {
				t.Fatal(err)
			}
			docs[gw.Name] = doc
			ports[gw.Name] = gw.Spec.Listeners[0].Port
			for _, l := range gw.Spec.Listeners {
				gwPorts[gw.Name] = append(gwPorts[gw.Name], l.Port)
			}
		}
		for _, c := range cases {
			doc, ok := docs[c.gateway]
			if !ok {
				if testing.Verbose() {
					t.Logf("skip %s: gateway %q not in the manifests", c.pos, c.gateway)
				}
				skipped++
				continue
			}
			if why, ok := suiteStateful[filepath.Base(strings.Split(c.pos, ":")[0])]; ok && c.status == why.status {
				skipped++ // the test changes the cluster first
				continue
			}
			// The suite sends a request to the listener whose port the Host
			// header names, if any; else to the Gateway's first listener.
			port := ports[c.gateway]
			if _, p, ok := strings.Cut(c.req.Host, ":"); ok {
				n, _ := strconv.Atoi(p)
				if slices.Contains(gwPorts[c.gateway], int32(n)) {
					port = int32(n)
				}
			}
			r := ghostServe(doc, ghostjson.SocketName(port), c.req)
			table := doc.Table()
			got := "404"
			switch {
			case r == nil:
			case len(r.Filters) > 0 && r.Filters[0].Type == ghostjson.FilterRequestRedirect:
				got = "redirect"
			default:
				var live []ghostjson.BackendGroup
				for _, g := range r.Backends {
					if g.Weight > 0 {
						live = append(live, g)
					}
				}
				switch {
				case len(live) == 0:
					got = "500"
				case len(live) > 1:
					skipped++ // weighted: not modelled
					continue
				case len(ghostjson.Endpoints(table, live[0].Backend, live[0].Unresolved)) == 0:
					got = "500"
				default:
					got = live[0].Backend
				}
			}
			want := strconv.Itoa(c.status)
			if c.backend != "" {
				want = "*/" + c.backend + ":*"
			}
			if !groupMatches(got, want) {
				t.Errorf("%s: %s %s%s %v on %s: got %s, want %s", filepath.Base(c.pos), c.req.Method, c.req.Host, c.req.Path, c.req.Headers, c.gateway, got, want)
			}
			checked++
		}
	}
	t.Logf("%d requests checked, %d skipped (outside the model)", checked, skipped)
	if checked < 50 {
		t.Errorf("only %d requests checked: the extraction broke", checked)
	}
}

// suiteStateful lists expectations that hold only after the test changed
// the cluster (not modelled): file -> the status expected then.
var suiteStateful = map[string]struct {
	status int
	why    string
}{
	"httproute-reference-grant.go": {500, "500 after the test deletes the ReferenceGrant"},
}

// groupMatches compares a backend group name (ns/svc:port) with a pattern
// "*/svc:*", or "404" with "404".
func groupMatches(got, want string) bool {
	if !strings.HasPrefix(want, "*/") || !strings.Contains(got, "/") {
		return got == want
	}
	_, rest, _ := strings.Cut(got, "/")
	svc, _, _ := strings.Cut(rest, ":")
	return "*/"+svc+":*" == want
}
