// Command echo-backend is the echo image's server: a backend pod for the
// end-to-end tests on a real node. It answers every request with its name
// (the pod name, from $HOSTNAME, or -name) in the body's first line and the
// X-Backend header, followed by the request it saw as JSON: the same answer
// as the demo's backends (echo.Handler).
//
//	echo-backend -listen :8080
//
// It stops on SIGTERM or SIGINT after finishing the requests in flight.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/echo"
)

func main() {
	listen := flag.String("listen", ":8080", "address to listen on")
	name := flag.String("name", "", "name to answer with (default: $HOSTNAME, the pod name)")
	flag.Parse()
	if *name == "" {
		*name = os.Getenv("HOSTNAME")
	}
	if *name == "" {
		fmt.Fprintln(os.Stderr, "echo-backend: no name: set -name or $HOSTNAME")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "echo-backend: listen on %s: %v\n", *listen, err)
		os.Exit(1)
	}
	slog.Info("echo-backend serving", "name", *name, "addr", l.Addr().String())
	if err := serve(ctx, l, *name); err != nil {
		fmt.Fprintf(os.Stderr, "echo-backend: %v\n", err)
		os.Exit(1)
	}
}

// serve answers on l until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, l net.Listener, name string) error {
	srv := &http.Server{Handler: echo.Handler(name), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
