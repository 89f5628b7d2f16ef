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
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd/varnishdtest"
)

// retryCase is one case of the suite's HTTPRouteRetry test: a path, the
// echo backend's retry simulation (the first succeedAfter requests of a
// uuid answer responseCode, the next 200) and the status the client must
// get.
type retryCase struct {
	pos, name, path string
	code, after     int
	want            int
}

// retryCases extracts the cases of tests/httproute-retry.go with
// go/parser (nothing is copied): composite literals with name, args and
// want. A field it does not know fails the test, so a change of the suite
// is noticed.
func retryCases(t *testing.T, path string) []retryCase {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	kvs := func(e ast.Expr) map[string]ast.Expr {
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
			switch k := kv.Key.(type) {
			case *ast.Ident:
				m[k.Name] = kv.Value
			case *ast.BasicLit:
				s, _ := strconv.Unquote(k.Value)
				m[s] = kv.Value
			default:
				t.Fatalf("%s: key %T", fset.Position(kv.Pos()), kv.Key)
			}
		}
		return m
	}
	lit := func(e ast.Expr) string {
		bl, ok := e.(*ast.BasicLit)
		if !ok {
			t.Fatalf("%s: not a literal", fset.Position(e.Pos()))
		}
		if bl.Kind == token.STRING {
			s, _ := strconv.Unquote(bl.Value)
			return s
		}
		return bl.Value
	}
	num := func(e ast.Expr) int {
		n, err := strconv.Atoi(lit(e))
		if err != nil {
			t.Fatalf("%s: %v", fset.Position(e.Pos()), err)
		}
		return n
	}
	var cases []retryCase
	ast.Inspect(f, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok || cl.Type != nil || len(cl.Elts) != 3 {
			return true
		}
		m := kvs(cl)
		if m["name"] == nil || m["args"] == nil || m["want"] == nil {
			return true
		}
		c := retryCase{pos: fset.Position(cl.Pos()).String(), name: lit(m["name"])}
		for k, v := range kvs(m["args"]) {
			switch k {
			case "path":
				c.path = lit(v)
			case "retrySimulationConfig":
				for q, vals := range kvs(v) {
					elts := vals.(*ast.CompositeLit).Elts
					if len(elts) != 1 {
						t.Fatalf("%s: %s has %d values", c.pos, q, len(elts))
					}
					switch q {
					case "responseCode":
						c.code = num(elts[0])
					case "succeedAfter":
						c.after = num(elts[0])
					default:
						t.Fatalf("%s: retry simulation parameter %s is not modelled", c.pos, q)
					}
				}
			default:
				t.Fatalf("%s: args.%s is not modelled", c.pos, k)
			}
		}
		for k, v := range kvs(m["want"]) {
			if k != "StatusCode" {
				t.Fatalf("%s: want.%s is not modelled", c.pos, k)
			}
			c.want = num(v)
		}
		cases = append(cases, c)
		return false
	})
	return cases
}

// retryBackend imitates the echo backend's retry simulation: per uuid,
// the first succeedAfter requests answer responseCode, the next 200. It
// counts the requests of each uuid.
type retryBackend struct {
	mu  sync.Mutex
	got map[string]int
}

func (b *retryBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	b.mu.Lock()
	n := b.got[q.Get("uuid")]
	b.got[q.Get("uuid")] = n + 1
	b.mu.Unlock()
	code, _ := strconv.Atoi(q.Get("responseCode"))
	after, _ := strconv.Atoi(q.Get("succeedAfter"))
	if code != 0 && n < after {
		w.WriteHeader(code)
		return
	}
	fmt.Fprintln(w, "echo")
}

// TestConformanceRetryThroughGhost replays the suite's HTTPRouteRetry
// (v1.6.3: codes 500 with attempts 3, codes 500 to 504 with attempts 2)
// through a real varnishd and ghost with the rendered main.vcl, serving
// the ghost.json that Attach, Merge and Resolve write, in front of an
// imitation of the echo backend's retry simulation: each case gets the
// status the suite wants, and the backend sees exactly the requests the
// policy allows (the first plus the retries, at most attempts of them).
func TestConformanceRetryThroughGhost(t *testing.T) {
	dir := conformanceDir(t)
	cases := retryCases(t, filepath.Join(dir, "tests", "httproute-retry.go"))
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

	be := &retryBackend{got: map[string]int{}}
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
		Listeners:      []varnishd.Listener{{Name: SocketName(gw.Spec.Listeners[0].Port), Addr: listen}},
		GhostAdminAddr: varnishdtest.FreeAddr(t),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vcl := mainvcl.Render(mainvcl.Options{VMOD: varnishdtest.GhostVMOD(t), GhostJSON: path})
	if err := p.Admin.VCLInline(ctx, "main", vcl); err != nil {
		t.Fatalf("vcl.inline: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	for i, c := range cases {
		uuid := fmt.Sprintf("case-%d", i)
		q := url.Values{"responseCode": {strconv.Itoa(c.code)}, "succeedAfter": {strconv.Itoa(c.after)}, "uuid": {uuid}}
		req, _ := http.NewRequest("GET", "http://"+listen+c.path+"?"+q.Encode(), nil)
		req.Host = "gateway.example" // the route has no hostnames
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s (%s): status %d, want %d", c.name, filepath.Base(c.pos), resp.StatusCode, c.want)
		}
		// the first request, then one retry per failure until a success
		// or the attempts run out
		a, ok := attempts[c.path]
		if !ok {
			t.Fatalf("%s: no rule for %s", c.name, c.path)
		}
		want := 1
		if retried[c.path][c.code] {
			want += min(c.after, a)
		}
		be.mu.Lock()
		got := be.got[uuid]
		be.mu.Unlock()
		if got != want {
			t.Errorf("%s: the backend got %d requests, want %d (attempts %d)", c.name, got, want, a)
		}
	}
	t.Logf("%d requests of HTTPRouteRetry checked through %s and ghost", len(cases), varnishdtest.Bin(t))
}
