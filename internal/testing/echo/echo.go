// Package echo is the HTTP answer of the project's test backends: the
// demo's backends (package demo) and the echo image's server
// (internal/demo/cmd/echo-backend) answer every request with their name in
// the body's first line and the X-Backend header, followed by the request
// they saw as JSON, so that routing, filters and rewrites can be seen from
// a client. It imports nothing beyond the standard library, to keep the
// echo image small.
package echo

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Answer is the JSON part of an answer.
type Answer struct {
	Backend string              `json:"backend"`
	Method  string              `json:"method"`
	Host    string              `json:"host"`
	Path    string              `json:"path"`
	Headers map[string][]string `json:"headers"`
}

// Handler answers every request as backend name.
func Handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		a := Answer{Backend: name, Method: r.Method, Host: r.Host, Path: r.URL.RequestURI(), Headers: r.Header}
		body, _ := json.Marshal(a)
		fmt.Fprintf(w, "%s\n%s\n", name, body)
	})
}
