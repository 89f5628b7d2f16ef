package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/echo"
)

// Backend is an HTTP echo server standing in for a pod of a Service. It
// answers every request with its name in the body's first line and the
// X-Backend header, followed by the request it saw as JSON (method, host,
// path, headers), so that filters and rewrites can be seen from a client.
type Backend struct {
	Name string
	IP   string
	Port int32
	srv  *http.Server
}

// Echo is the JSON part of a Backend's answer.
type Echo = echo.Answer

// StartBackend starts a Backend named name on ip and a free port.
func StartBackend(name, ip string) (*Backend, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("start backend %s: %w", name, err)
	}
	b := &Backend{Name: name, IP: ip, Port: int32(l.Addr().(*net.TCPAddr).Port)}
	b.srv = &http.Server{Handler: echo.Handler(name), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := b.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(fmt.Sprintf("backend %s: %v", name, err))
		}
	}()
	return b, nil
}

// Addr is ip:port.
func (b *Backend) Addr() string { return net.JoinHostPort(b.IP, strconv.Itoa(int(b.Port))) }

// Close stops the backend.
func (b *Backend) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.srv.Shutdown(ctx)
}
