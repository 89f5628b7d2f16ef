// Command controlplane starts the local test control plane (etcd and
// kube-apiserver with the Gateway API CRDs, see package testenv), prints how
// to reach it and serves until interrupted. `make controlplane` runs it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	slog.Info("starting etcd, kube-apiserver and the Gateway API CRDs")
	cp, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		slog.Error("start control plane", "err", err)
		os.Exit(1)
	}
	defer cp.Stop()

	fmt.Printf(`
The local control plane is running (etcd + kube-apiserver, RBAC on, Gateway API CRDs served).

  API server:  %s
  kubeconfig:  %s   (admin, group system:masters)

  export KUBECONFIG=%s

Press Ctrl-C to stop it; everything it wrote is removed.
`, cp.Config.Host, cp.Kubeconfig, cp.Kubeconfig)
	<-ctx.Done()
	slog.Info("stopping the control plane")
}
