package routing

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// corsCase is one http.ExpectedResponse of the suite's HTTPRouteCORS test,
// with the response fields it checks.
type corsCase struct {
	pos              string
	method, path     string
	headers          map[string]string
	statuses         []int
	exact            map[string]string   // Response.Headers
	valid            map[string][]string // Response.ValidHeaderValues
	absent           []string            // Response.AbsentHeaders
	ignoreWhitespace bool
}

// corsCases extracts the cases of tests/httproute-cors.go with go/parser
// (nothing is copied); a literal with a field it does not know fails the
// test, so a change of the suite is noticed.
func corsCases(t *testing.T, path string) []corsCase {
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
	num := func(e ast.Expr) int {
		bl, ok := e.(*ast.BasicLit)
		if !ok || bl.Kind != token.INT {
			t.Fatalf("%s: not an integer literal", fset.Position(e.Pos()))
		}
		n, _ := strconv.Atoi(bl.Value)
		return n
	}
	fields := func(e ast.Expr) map[string]ast.Expr {
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
	var cases []corsCase
	ast.Inspect(f, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok || !isExpectedResponse(cl) {
			return true
		}
		c := corsCase{pos: fset.Position(cl.Pos()).String(), headers: map[string]string{}, exact: map[string]string{}, valid: map[string][]string{}}
		for k, v := range fields(cl) {
			switch k {
			case "Request":
				for rk, rv := range fields(v) {
					switch rk {
					case "Path":
						c.path = str(rv)
					case "Method":
						c.method = str(rv)
					case "Headers":
						for hk, hv := range fields(rv) {
							c.headers[hk] = str(hv)
						}
					default:
						t.Fatalf("%s: Request.%s is not modelled", c.pos, rk)
					}
				}
			case "Response":
				for rk, rv := range fields(v) {
					switch rk {
					case "StatusCode":
						c.statuses = append(c.statuses, num(rv))
					case "StatusCodes":
						for _, e := range rv.(*ast.CompositeLit).Elts {
							c.statuses = append(c.statuses, num(e))
						}
					case "Headers":
						for hk, hv := range fields(rv) {
							c.exact[hk] = str(hv)
						}
					case "ValidHeaderValues":
						for hk, hv := range fields(rv) {
							for _, e := range hv.(*ast.CompositeLit).Elts {
								c.valid[hk] = append(c.valid[hk], str(e))
							}
						}
					case "AbsentHeaders":
						for _, e := range rv.(*ast.CompositeLit).Elts {
							c.absent = append(c.absent, str(e))
						}
					case "IgnoreWhitespace":
						c.ignoreWhitespace = fmt.Sprint(rv) == "true"
					default:
						t.Fatalf("%s: Response.%s is not modelled", c.pos, rk)
					}
				}
			case "TestCaseName", "Namespace", "ExpectedRequest":
				// the echo server's view of the request: not checked here
			default:
				t.Fatalf("%s: field %s is not modelled", c.pos, k)
			}
		}
		if len(c.statuses) == 0 {
			c.statuses = []int{200}
		}
		cases = append(cases, c)
		return false
	})
	return cases
}

// TestConformanceCORSThroughGhost replays every request of the suite's
// HTTPRouteCORS test through a real varnishd and ghost, serving the
// ghost.json that Attach, Merge and Resolve write for its manifests, in
// front of a backend that answers 200: the status and every response
// header the suite checks (exact, one of the valid values, absent).
func TestConformanceCORSThroughGhost(t *testing.T) {
	dir := conformanceDir(t)
	cases := corsCases(t, filepath.Join(dir, "tests", "httproute-cors.go"))
	if len(cases) < 15 {
		t.Fatalf("%d cases extracted from httproute-cors.go: the extraction broke", len(cases))
	}

	var (
		mu          sync.Mutex
		backendHits []string
	)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		backendHits = append(backendHits, r.Method+" "+r.URL.Path)
		mu.Unlock()
		fmt.Fprintln(w, "echo")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	backendPort := int32(l.Addr().(*net.TCPAddr).Port)

	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	objs := &Objects{Namespaces: base.namespaces, Services: append([]*corev1.Service{}, base.services...)}
	for _, svc := range objs.Services {
		for _, p := range svc.Spec.Ports {
			objs.EndpointSlices = append(objs.EndpointSlices, slice(svc.Namespace, svc.Name, svc.Name+"-"+p.Name,
				discoveryv1.AddressTypeIPv4, p.Name, backendPort, ep(nil, "127.0.0.1")))
		}
	}
	listen := serveThroughGhost(t, dir, "httproute-cors.yaml", objs, base)

	client := &http.Client{Timeout: 10 * time.Second}
	for _, c := range cases {
		method := c.method
		if method == "" {
			method = "GET"
		}
		req, _ := http.NewRequest(method, "http://"+listen+c.path, nil)
		req.Host = "gateway.example" // the routes have no hostnames
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.pos, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		where := fmt.Sprintf("%s: %s %s %v", filepath.Base(c.pos), method, c.path, c.headers)
		if !slices.Contains(c.statuses, resp.StatusCode) {
			t.Errorf("%s: status %d, want one of %v", where, resp.StatusCode, c.statuses)
		}
		norm := func(s string) string {
			if c.ignoreWhitespace {
				return strings.Join(strings.Fields(s), "")
			}
			return s
		}
		for h, want := range c.exact {
			if got := resp.Header.Values(h); len(got) != 1 || got[0] != want {
				t.Errorf("%s: %s = %q, want %q", where, h, got, want)
			}
		}
		for h, want := range c.valid {
			got := resp.Header.Values(h)
			ok := len(got) == 1 && slices.ContainsFunc(want, func(w string) bool { return norm(w) == norm(got[0]) })
			if !ok {
				t.Errorf("%s: %s = %q, want one of %q", where, h, got, want)
			}
		}
		for _, h := range c.absent {
			if got := resp.Header.Values(h); len(got) > 0 {
				t.Errorf("%s: %s = %q, want it absent", where, h, got)
			}
		}
	}
	// preflights never reach the backend
	mu.Lock()
	defer mu.Unlock()
	for _, h := range backendHits {
		if strings.HasPrefix(h, "OPTIONS ") {
			t.Errorf("the backend got a preflight: %s", h)
		}
	}
	t.Logf("%d requests of HTTPRouteCORS checked through %s and ghost; the backend got %d", len(cases), varnishdtest.Bin(t), len(backendHits))
}
