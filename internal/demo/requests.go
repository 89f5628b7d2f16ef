package demo

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Request is one request a user would make with curl.
type Request struct {
	Method  string
	Host    string
	Path    string
	Headers map[string]string
}

// Curl is the curl command line of r against the gateway at addr.
func (r Request) Curl(addr string) string {
	var b strings.Builder
	b.WriteString("curl -si")
	if r.Method != "" && r.Method != http.MethodGet {
		b.WriteString(" -X " + r.Method)
	}
	fmt.Fprintf(&b, " -H 'Host: %s'", r.Host)
	for k, v := range r.Headers {
		fmt.Fprintf(&b, " -H '%s: %s'", k, v)
	}
	fmt.Fprintf(&b, " http://%s%s", addr, r.Path)
	return b.String()
}

// Answer is what the gateway answered.
type Answer struct {
	Status   int
	Backend  string // X-Backend of the answer: which backend served it
	Location string
	Body     string
	// Header is the answer's whole header (X-Cache and the like).
	Header http.Header
}

func (a Answer) String() string {
	switch {
	case a.Location != "":
		return fmt.Sprintf("%d, Location: %s", a.Status, a.Location)
	case a.Backend != "":
		return fmt.Sprintf("%d from backend %s", a.Status, a.Backend)
	default:
		return fmt.Sprintf("%d %s", a.Status, strings.TrimSpace(a.Body))
	}
}

// noRedirects is a client that shows redirects instead of following them
// and opens a new connection per request (so it never holds a session
// that would keep a drain waiting).
var noRedirects = &http.Client{
	Timeout:       5 * time.Second,
	Transport:     &http.Transport{DisableKeepAlives: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Do sends r to the gateway at addr.
func (r Request) Do(addr string) (Answer, error) {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, "http://"+addr+r.Path, nil)
	if err != nil {
		return Answer{}, err
	}
	req.Host = r.Host
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return Answer{Status: resp.StatusCode, Backend: resp.Header.Get("X-Backend"), Location: resp.Header.Get("Location"), Body: string(body), Header: resp.Header}, nil
}

// Spread sends r n times and counts the answers by backend ("" for answers
// no backend gave).
func (r Request) Spread(addr string, n int) (map[string]int, error) {
	out := map[string]int{}
	for range n {
		a, err := r.Do(addr)
		if err != nil {
			return out, err
		}
		out[a.Backend]++
	}
	return out, nil
}
