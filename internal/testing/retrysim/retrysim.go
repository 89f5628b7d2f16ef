// Package retrysim replays the Gateway API conformance suite's
// HTTPRouteRetry scenario in tests: Cases reads its cases from the suite's
// source (tests/httproute-retry.go, parsed with go/parser, never copied),
// and Simulation imitates the retry simulation of the suite's echo backend
// that the scenario sends its requests to. The routing core's replay
// through varnishd (internal/routing) and the replay of the whole suite
// through the chaperone (TestConformanceReplay, e2e/conformance) both use
// it, so that the two agree on what the backend does.
package retrysim

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
)

// Case is one case of the suite's HTTPRouteRetry test: a request to Path
// whose backend fails the first SucceedAfter requests of a uuid with
// status Code, then answers; the client must get status Want.
type Case struct {
	Pos          string // file:line of the case in the suite's source, e.g. httproute-retry.go:63
	Name         string
	Path         string
	Code         int
	SucceedAfter int
	Want         int
}

// Query is the query string the suite sends for c: the simulation's
// parameters and uuid, which keeps the count of one request's attempts
// apart from every other's.
func (c Case) Query(uuid string) string {
	return url.Values{
		"responseCode": {strconv.Itoa(c.Code)},
		"succeedAfter": {strconv.Itoa(c.SucceedAfter)},
		"uuid":         {uuid},
	}.Encode()
}

// Cases reads the cases of the suite's tests/httproute-retry.go at path:
// the composite literals with the fields name, args and want. A field or
// a retry simulation parameter it does not model is an error, so that a
// new version of the suite is noticed rather than half replayed.
func Cases(path string) ([]Case, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	p := &reader{fset: fset}
	var cases []Case
	ast.Inspect(f, func(n ast.Node) bool {
		if p.err != nil {
			return false
		}
		cl, ok := n.(*ast.CompositeLit)
		if !ok || cl.Type != nil || len(cl.Elts) != 3 {
			return true
		}
		m := p.fields(cl)
		if m["name"] == nil || m["args"] == nil || m["want"] == nil {
			return true
		}
		pos := fset.Position(cl.Pos())
		c := Case{Pos: fmt.Sprintf("%s:%d", filepath.Base(pos.Filename), pos.Line), Name: p.literal(m["name"])}
		for k, v := range p.fields(m["args"]) {
			switch k {
			case "path":
				c.Path = p.literal(v)
			case "retrySimulationConfig":
				for q, vals := range p.fields(v) {
					elts, ok := vals.(*ast.CompositeLit)
					if !ok || len(elts.Elts) != 1 {
						p.fail(vals, "retry simulation parameter %s is not a single literal value", q)
						return false
					}
					switch q {
					case "responseCode":
						c.Code = p.number(elts.Elts[0])
					case "succeedAfter":
						c.SucceedAfter = p.number(elts.Elts[0])
					default:
						p.fail(vals, "retry simulation parameter %s is not modelled", q)
					}
				}
			default:
				p.fail(v, "args.%s is not modelled", k)
			}
		}
		for k, v := range p.fields(m["want"]) {
			if k != "StatusCode" {
				p.fail(v, "want.%s is not modelled", k)
			}
			c.Want = p.number(v)
		}
		cases = append(cases, c)
		return false
	})
	if p.err != nil {
		return nil, p.err
	}
	return cases, nil
}

// reader evaluates the literals of one file; the first error sticks.
type reader struct {
	fset *token.FileSet
	err  error
}

func (p *reader) fail(n ast.Node, format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%s: %s", p.fset.Position(n.Pos()), fmt.Sprintf(format, args...))
	}
}

// fields are the key: value elements of a composite literal.
func (p *reader) fields(e ast.Expr) map[string]ast.Expr {
	m := map[string]ast.Expr{}
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		p.fail(e, "not a composite literal")
		return m
	}
	for _, el := range cl.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			p.fail(el, "not key: value")
			continue
		}
		switch k := kv.Key.(type) {
		case *ast.Ident:
			m[k.Name] = kv.Value
		case *ast.BasicLit:
			s, err := strconv.Unquote(k.Value)
			if err != nil {
				p.fail(k, "key %s: %v", k.Value, err)
			}
			m[s] = kv.Value
		default:
			p.fail(kv, "key of type %T", kv.Key)
		}
	}
	return m
}

func (p *reader) literal(e ast.Expr) string {
	bl, ok := e.(*ast.BasicLit)
	if !ok {
		p.fail(e, "not a literal")
		return ""
	}
	if bl.Kind == token.STRING {
		s, err := strconv.Unquote(bl.Value)
		if err != nil {
			p.fail(e, "%v", err)
		}
		return s
	}
	return bl.Value
}

func (p *reader) number(e ast.Expr) int {
	s := p.literal(e)
	n, err := strconv.Atoi(s)
	if err != nil && p.err == nil {
		p.fail(e, "%q is not an integer", s)
	}
	return n
}

// Simulation imitates the suite's echo backend's retry simulation (its
// handler of /retry/): per uuid query parameter, the first succeedAfter
// requests fail, with status responseCode when the query has one and
// with a connection reset when it does not; the next ones are answered by
// Success. A request without uuid or succeedAfter gets 400. It counts the
// requests of each uuid.
type Simulation struct {
	// Success answers once a uuid's failures are over.
	Success http.Handler

	mu  sync.Mutex
	got map[string]int
}

// New returns a Simulation answered by success after the failures.
func New(success http.Handler) *Simulation {
	return &Simulation{Success: success, got: map[string]int{}}
}

func (s *Simulation) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	uuid := q.Get("uuid")
	if uuid == "" {
		http.Error(w, "the retry simulation needs ?uuid=", http.StatusBadRequest)
		return
	}
	after, err := strconv.Atoi(q.Get("succeedAfter"))
	if err != nil {
		http.Error(w, "the retry simulation needs ?succeedAfter=<integer>", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	n := s.got[uuid]
	s.got[uuid] = n + 1
	s.mu.Unlock()
	if n >= after {
		s.Success.ServeHTTP(w, r)
		return
	}
	if code, err := strconv.Atoi(q.Get("responseCode")); err == nil {
		w.WriteHeader(code)
		return
	}
	reset(w)
}

// Requests is the number of requests uuid got.
func (s *Simulation) Requests(uuid string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[uuid]
}

// reset closes the request's connection with a TCP reset, the failure of
// the echo backend's default mode.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "cannot reset the connection: no http.Hijacker", http.StatusInternalServerError)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		http.Error(w, "cannot reset the connection: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // a reset, not an orderly close
	}
	_ = conn.Close()
}
