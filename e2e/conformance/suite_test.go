package conformance

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// This file reads the public Gateway API conformance suite's HTTPRoute
// scenarios (tests/httproute-*.go of the module
// sigs.k8s.io/gateway-api/conformance, found with `go list -m` and never
// copied into this repository) with go/parser: each ConformanceTest's
// ShortName, Features and Manifests, and its http.ExpectedResponse
// literals, evaluated into the mirror types below. A literal with a field
// the mirror does not have, or a value that is not a literal, makes its
// scenario "not replayed" with the reason, so that a new suite version is
// noticed instead of half-replayed.

// suiteScenario is one ConformanceTest of the suite.
type suiteScenario struct {
	File      string   // e.g. httproute-matching.go
	ShortName string   // e.g. HTTPRouteMatching
	Features  []string // feature names, e.g. HTTPRouteQueryParamMatching
	Manifests []string // e.g. tests/httproute-matching.yaml
	Cases     []suiteCase
	// Unreadable names the first case that could not be evaluated.
	Unreadable string
	testOf     string // the test whose Test function this one runs
}

// suiteCase is one http.ExpectedResponse literal, with the Gateway the
// test sends it to (the latest gw* NamespacedName before it).
type suiteCase struct {
	Pos     string
	Gateway string
	Port    int32  // the listener port of the gwAddrNNN the test sends it to; 0: the first listener's
	table   string // the []http.ExpectedResponse variable that holds it
	// probe, when set, changes the request of each probe before it is
	// sent, as a test that builds its requests in code does
	// (HTTPRouteRetry: a fresh uuid each time).
	probe func(c *suiteCase)
	// ServerName is the TLS server name (SNI) the test's MakeTLSRequest...
	// call passes with the case; "" when the test sends it otherwise (the
	// replay then uses the Host's name, as those tests do).
	ServerName string

	Request                   suiteRequest
	ExpectedRequest           *suiteExpectedRequest
	RedirectRequest           *suiteRedirect
	BackendSetResponseHeaders map[string]string
	Response                  suiteResponse
	Backend                   string
	Namespace                 string
	MirroredTo                []suiteMirror
	TestCaseName              string
}

type suiteRequest struct {
	Host             string
	Method           string
	Path             string
	Headers          map[string]string
	UnfollowRedirect bool
	Protocol         string
}

type suiteExpectedRequest struct {
	Request       suiteRequest
	AbsentHeaders []string
}

type suiteRedirect struct {
	Scheme, Host, Port, Path string
}

type suiteResponse struct {
	StatusCode        int
	StatusCodes       []int
	Headers           map[string]string
	ValidHeaderValues map[string][]string
	AbsentHeaders     []string
	IgnoreWhitespace  bool
}

type suiteMirror struct {
	BackendRef struct{ Name, Namespace string }
	Percent    *int32
}

// suiteConstants are the values of the suite's exported names the
// ExpectedResponse literals use.
var suiteConstants = map[string]string{
	"InfraBackendServiceNameV1": "infra-backend-v1",
	"InfraBackendServiceNameV2": "infra-backend-v2",
	"InfraBackendServiceNameV3": "infra-backend-v3",
	"InfrastructureNamespace":   "gateway-conformance-infra",
	"InfrastructureGatewayName": "same-namespace",
	"AppBackendNamespace":       "gateway-conformance-app-backend",
	"WebBackendNamespace":       "gateway-conformance-web-backend",
	"H2Protocol":                "H2", // roundtripper.H2Protocol: HTTP/2 over TLS
}

// suiteModuleDir is the directory of the conformance module at the
// version of sigs.k8s.io/gateway-api this module requires.
func suiteModuleDir(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/gateway-api: %v", err)
	}
	mod := "sigs.k8s.io/gateway-api/conformance@" + strings.TrimSpace(string(out))
	// go mod download fetches the module through the module proxy on a
	// machine that has not got it yet, and prints where it is.
	out, err = exec.Command("go", "mod", "download", "-json", mod).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v: %s", mod, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: no directory (%s): %v", mod, info.Error, err)
	}
	return info.Dir
}

// readSuiteScenarios parses every tests/httproute-*.go of the suite.
func readSuiteScenarios(t testing.TB, dir string) []*suiteScenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "tests", "httproute-*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no httproute-*.go in %s/tests: %v", dir, err)
	}
	var out []*suiteScenario
	for _, f := range files {
		out = append(out, readSuiteFile(t, f)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ShortName < out[j].ShortName })
	return out
}

func readSuiteFile(t testing.TB, path string) []*suiteScenario {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	ev := &suiteEval{fset: fset, vars: map[string]string{}}
	// Local string variables (ns := confsuite.InfrastructureNamespace).
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == len(vs.Values) {
			for i, id := range vs.Names {
				if s, err := ev.str(vs.Values[i]); err == nil {
					ev.vars[id.Name] = s
				}
			}
		}
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok {
					if s, err := ev.str(as.Rhs[i]); err == nil {
						ev.vars[id.Name] = s
					}
				}
			}
		}
		return true
	})
	var scenarios []*suiteScenario
	ast.Inspect(f, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if sel, ok := cl.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != "ConformanceTest" {
			return true
		}
		s := &suiteScenario{File: filepath.Base(path)}
		for _, el := range cl.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch fmt.Sprint(kv.Key) {
			case "ShortName":
				s.ShortName, _ = ev.str(kv.Value)
			case "Manifests":
				if l, ok := kv.Value.(*ast.CompositeLit); ok {
					for _, e := range l.Elts {
						m, _ := ev.str(e)
						s.Manifests = append(s.Manifests, m)
					}
				}
			case "Features":
				if l, ok := kv.Value.(*ast.CompositeLit); ok {
					for _, e := range l.Elts {
						if sel, ok := e.(*ast.SelectorExpr); ok {
							s.Features = append(s.Features, strings.TrimPrefix(sel.Sel.Name, "Support"))
						}
					}
				}
			case "Test":
				if sel, ok := kv.Value.(*ast.SelectorExpr); ok {
					// Test: OtherTest.Test: another test's requests
					// against this test's manifests.
					s.testOf = fmt.Sprint(sel.X)
					continue
				}
				s.Cases, s.Unreadable = ev.cases(kv.Value)
				if len(s.Cases) == 0 && s.Unreadable == "" {
					// The test calls a function of the file that holds
					// the cases (one function shared by two tests).
					s.Cases, s.Unreadable = ev.cases(calledFuncs(f, kv.Value)...)
				}
			}
		}
		sort.Strings(s.Features)
		s.Features = compactStrings(s.Features)
		scenarios = append(scenarios, s)
		return false
	})
	for _, s := range scenarios {
		for _, o := range scenarios {
			if s.testOf != "" && o.ShortName == s.testOf {
				s.Cases, s.Unreadable = o.Cases, o.Unreadable
			}
		}
	}
	return scenarios
}

func compactStrings(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// suiteEval evaluates the literals of one suite file.
type suiteEval struct {
	fset *token.FileSet
	vars map[string]string
	row  map[string]map[string]ast.Expr // tc -> field -> value, in a range over a table
}

// resolve replaces tc.field, in a range over a table, by the row's value;
// nil when the row leaves the field out (its zero value).
func (ev *suiteEval) resolve(e ast.Expr) (ast.Expr, bool) {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok {
			if fields, ok := ev.row[x.Name]; ok {
				v, ok := fields[sel.Sel.Name]
				return v, ok
			}
		}
	}
	return e, true
}

func (ev *suiteEval) pos(n ast.Node) string {
	p := ev.fset.Position(n.Pos())
	return fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line)
}

func (ev *suiteEval) str(e ast.Expr) (string, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return strconv.Unquote(e.Value)
		}
	case *ast.SelectorExpr:
		if v, ok := suiteConstants[e.Sel.Name]; ok {
			return v, nil
		}
	case *ast.Ident:
		if v, ok := ev.vars[e.Name]; ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s: %s is not a literal the replay evaluates", ev.pos(e), types.ExprString(e))
}

// cases returns the ExpectedResponse literals in the test function body,
// each with the Gateway it is sent to. A literal inside a range over a
// table of struct literals (for _, tc := range cases) is evaluated once
// per row, tc.field standing for the row's field. Cases held by a
// []http.ExpectedResponse variable get the listener port of the gwAddrNNN
// the range over that variable passes on.
func (ev *suiteEval) cases(bodies ...ast.Node) (cases []suiteCase, unreadable string) {
	gateway := "same-namespace"
	gwName := func(e ast.Expr) {
		if cl, ok := e.(*ast.CompositeLit); ok {
			for _, el := range cl.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok && fmt.Sprint(kv.Key) == "Name" {
					if s, err := ev.str(kv.Value); err == nil {
						gateway = s
					}
				}
			}
		}
	}
	tables := map[string]*ast.CompositeLit{} // struct tables by variable
	addrGateway := map[string]string{}       // gwAddr variable -> Gateway name
	table := ""                              // the ExpectedResponse slice being assigned
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				id, ok := l.(*ast.Ident)
				if !ok || i >= len(n.Rhs) {
					continue
				}
				if strings.HasPrefix(id.Name, "gwAddr") {
					addrGateway[id.Name] = gateway // the Gateway this address is of
				} else if strings.HasPrefix(id.Name, "gw") {
					gwName(n.Rhs[i])
				}
				if cl, ok := n.Rhs[i].(*ast.CompositeLit); ok {
					if at, ok := cl.Type.(*ast.ArrayType); ok {
						if _, isStruct := at.Elt.(*ast.StructType); isStruct {
							tables[id.Name] = cl
						} else if sel, ok := at.Elt.(*ast.SelectorExpr); ok && sel.Sel.Name == "ExpectedResponse" {
							table = id.Name
							for i := range cases {
								if cases[i].table == id.Name {
									cases[i].table = "" // an earlier slice of the same name
								}
							}
						}
					}
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if strings.HasPrefix(id.Name, "gw") && i < len(n.Values) {
					gwName(n.Values[i])
				}
			}
		case *ast.RangeStmt:
			x, _ := n.X.(*ast.Ident)
			if x == nil {
				return true
			}
			if addr := rangeAddr(n.Body); addr != "" {
				port, _ := strconv.Atoi(strings.TrimPrefix(addr, "gwAddr"))
				for i := range cases {
					if cases[i].table == x.Name {
						cases[i].Port = int32(port)
						if gw, ok := addrGateway[addr]; ok {
							cases[i].Gateway = gw
						}
					}
				}
			}
			if sni := ev.tlsServerName(n.Body); sni != "" {
				for i := range cases {
					if cases[i].table == x.Name {
						cases[i].ServerName = sni
					}
				}
			}
			rows, ok := tables[x.Name]
			v, _ := n.Value.(*ast.Ident)
			if !ok || v == nil {
				return true
			}
			for _, row := range rows.Elts {
				cl, ok := row.(*ast.CompositeLit)
				if !ok {
					continue
				}
				fields := map[string]ast.Expr{}
				for _, el := range cl.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						fields[fmt.Sprint(kv.Key)] = kv.Value
					}
				}
				ev.row = map[string]map[string]ast.Expr{v.Name: fields}
				first := len(cases)
				ast.Inspect(n.Body, visit)
				if sni := ev.tlsServerName(n.Body); sni != "" {
					for i := first; i < len(cases); i++ {
						cases[i].ServerName = sni
					}
				}
				ev.row = nil
			}
			return false
		case *ast.CompositeLit:
			if !isSuiteExpectedResponse(n) {
				return true
			}
			c := suiteCase{Pos: ev.pos(n), Gateway: gateway, table: table}
			if err := ev.into(n, reflect.ValueOf(&c).Elem()); err != nil {
				if unreadable == "" {
					unreadable = err.Error()
				}
				return false
			}
			cases = append(cases, c)
			return false
		}
		return true
	}
	for _, body := range bodies {
		ast.Inspect(body, visit)
	}
	return cases, unreadable
}

// tlsServerName is the server name a MakeTLSRequest... call in body
// passes (the argument before the ExpectedResponse), evaluated for the
// current row of a table; "" when body makes no such call or the name is
// not a literal the replay evaluates.
func (ev *suiteEval) tlsServerName(body ast.Node) string {
	name := ""
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !strings.HasPrefix(sel.Sel.Name, "MakeTLSRequest") || len(call.Args) < 2 {
			return true
		}
		if e, ok := ev.resolve(call.Args[len(call.Args)-2]); ok && e != nil {
			if s, err := ev.str(e); err == nil {
				name = s
			}
		}
		return true
	})
	return name
}

// rangeAddr is the gwAddr... variable a call in body passes.
func rangeAddr(body ast.Node) string {
	addr := ""
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		for _, a := range call.Args {
			if id, ok := a.(*ast.Ident); ok && strings.HasPrefix(id.Name, "gwAddr") {
				addr = id.Name
			}
		}
		return true
	})
	return addr
}

// calledFuncs returns the declarations of the file's functions that n calls.
func calledFuncs(f *ast.File, n ast.Node) []ast.Node {
	decls := map[string]*ast.FuncDecl{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
			decls[fd.Name.Name] = fd
		}
	}
	var out []ast.Node
	ast.Inspect(n, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && decls[id.Name] != nil {
				out = append(out, decls[id.Name])
			}
		}
		return true
	})
	return out
}

func isSuiteExpectedResponse(cl *ast.CompositeLit) bool {
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

// into evaluates e into v (a mirror type): composite literals, string,
// integer and boolean literals, known names, & and new(T(x)).
func (ev *suiteEval) into(e ast.Expr, v reflect.Value) error {
	e, ok := ev.resolve(e)
	if !ok {
		return nil // a field the table row leaves out
	}
	if id, isID := e.(*ast.Ident); isID && id.Name == "nil" {
		return nil
	}
	if v.Kind() == reflect.Pointer {
		v.Set(reflect.New(v.Type().Elem()))
		switch x := e.(type) {
		case *ast.UnaryExpr:
			if x.Op == token.AND {
				return ev.into(x.X, v.Elem())
			}
		case *ast.CallExpr: // new(int32(20))
			if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "new" && len(x.Args) == 1 {
				return ev.into(x.Args[0], v.Elem())
			}
		}
		return ev.into(e, v.Elem())
	}
	switch v.Kind() {
	case reflect.String:
		s, err := ev.str(e)
		if err != nil {
			return err
		}
		v.SetString(s)
		return nil
	case reflect.Int, reflect.Int32:
		if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 { // int32(20)
			e = call.Args[0]
		}
		if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.INT {
			n, err := strconv.Atoi(bl.Value)
			v.SetInt(int64(n))
			return err
		}
		return fmt.Errorf("%s: not an integer literal", ev.pos(e))
	case reflect.Bool:
		if id, ok := e.(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
			v.SetBool(id.Name == "true")
			return nil
		}
		return fmt.Errorf("%s: not a boolean literal", ev.pos(e))
	}
	cl, ok := e.(*ast.CompositeLit)
	if id, isID := e.(*ast.Ident); isID && id.Name == "nil" {
		return nil
	}
	if !ok {
		return fmt.Errorf("%s: %s is not a literal the replay evaluates", ev.pos(e), types.ExprString(e))
	}
	switch v.Kind() {
	case reflect.Struct:
		for _, el := range cl.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				return fmt.Errorf("%s: unkeyed field", ev.pos(el))
			}
			name := fmt.Sprint(kv.Key)
			f := v.FieldByName(name)
			own := v.Type() == reflect.TypeOf(suiteCase{}) && (name == "Pos" || name == "Gateway" || name == "Port")
			if !f.IsValid() || !f.CanSet() || own {
				return fmt.Errorf("%s: field %s is not modelled by the replay", ev.pos(kv), name)
			}
			if err := ev.into(kv.Value, f); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for _, el := range cl.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				return fmt.Errorf("%s: map element without a key", ev.pos(el))
			}
			k := reflect.New(v.Type().Key()).Elem()
			val := reflect.New(v.Type().Elem()).Elem()
			if err := ev.into(kv.Key, k); err != nil {
				return err
			}
			if err := ev.into(kv.Value, val); err != nil {
				return err
			}
			v.SetMapIndex(k, val)
		}
		return nil
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), len(cl.Elts), len(cl.Elts))
		for i, el := range cl.Elts {
			if err := ev.into(el, s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	return fmt.Errorf("%s: cannot evaluate into %s", ev.pos(e), v.Type())
}

// TestReadSuiteScenarios checks the extraction: every scenario has a
// ShortName, features and manifests, and the literal cases are found.
func TestReadSuiteScenarios(t *testing.T) {
	scenarios := readSuiteScenarios(t, suiteModuleDir(t))
	cases := 0
	for _, s := range scenarios {
		if s.ShortName == "" || len(s.Features) == 0 {
			t.Errorf("%s: ShortName %q, Features %v", s.File, s.ShortName, s.Features)
		}
		cases += len(s.Cases)
		if testing.Verbose() {
			t.Logf("%s %s %v %v: %d cases %s", s.File, s.ShortName, s.Features, s.Manifests, len(s.Cases), s.Unreadable)
		}
	}
	if len(scenarios) < 50 || cases < 100 {
		t.Errorf("%d scenarios with %d cases: the extraction broke", len(scenarios), cases)
	}

	// The server name (SNI) comes from the MakeTLSRequest call, per row of
	// the table the test ranges over: HTTPRouteHTTPSListenerDetectMisdirectedRequests
	// sends Hosts on connections for other names.
	type tlsCase struct {
		serverName, host, protocol string
		status                     int
	}
	want := map[string][]tlsCase{
		"HTTPRouteHTTPSListenerDetectMisdirectedRequests": {
			{"example.org", "example.org", "H2", 200},
			{"example.org", "second-example.org", "H2", 421},
			{"example.org", "unknown-example.org", "H2", 404},
			{"second-example.org", "second-example.org", "H2", 200},
			{"second-example.org", "example.org", "H2", 421},
			{"second-example.org", "unknown-example.org", "H2", 421},
			{"third-example.wildcard.org", "third-example.wildcard.org", "H2", 200},
			{"third-example.wildcard.org", "fith-example.wildcard.org", "H2", 200},
			{"third-example.wildcard.org", "fourth-example.wildcard.org", "H2", 421},
			{"third-example.wildcard.org", "second-example.org", "H2", 421},
			{"third-example.wildcard.org", "unknown-example.org", "H2", 421},
			{"fourth-example.wildcard.org", "fourth-example.wildcard.org", "H2", 200},
			{"fourth-example.wildcard.org", "fith-example.wildcard.org", "H2", 421},
			{"unknown-example.org", "example.org", "H2", 200},
			{"unknown-example.org", "unknown-example.org", "H2", 404},
		},
		// A literal server name for an ExpectedResponse table.
		"HTTPRouteRedirectPortAndScheme": nil,
	}
	for _, s := range scenarios {
		w, ok := want[s.ShortName]
		if !ok {
			continue
		}
		delete(want, s.ShortName)
		if s.Unreadable != "" {
			t.Errorf("%s: unreadable: %s", s.ShortName, s.Unreadable)
		}
		if w == nil {
			tls := 0
			for _, c := range s.Cases {
				if c.Port == 443 {
					tls++
					if c.ServerName != "example.org" {
						t.Errorf("%s %s: server name %q, want example.org (the test's literal)", s.ShortName, c.Pos, c.ServerName)
					}
				}
			}
			if tls == 0 {
				t.Errorf("%s: no case for gwAddr443: the extraction broke", s.ShortName)
			}
			continue
		}
		var got []tlsCase
		for _, c := range s.Cases {
			status := c.Response.StatusCode
			if len(c.Response.StatusCodes) == 1 {
				status = c.Response.StatusCodes[0]
			}
			got = append(got, tlsCase{c.ServerName, c.Request.Host, c.Request.Protocol, status})
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s: cases (server name, Host, protocol, status)\n got %v\nwant %v", s.ShortName, got, w)
		}
	}
	for name := range want {
		t.Errorf("scenario %s not found", name)
	}
}
