// Command controlplane starts the local test control plane (etcd and
// kube-apiserver with the Gateway API CRDs, see package testenv), with
// -node a single-node cluster too, prints how to reach it and serves until
// interrupted. `make controlplane` runs it (`make controlplane NODE=1` with
// a node).
//
// With -sweep it undoes what a killed test node left on this machine and
// exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func main() {
	node := flag.Bool("node", false, "start a single-node cluster too (kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy; needs root)")
	sweep := flag.Bool("sweep", false, "undo what a killed test node left on this machine, and exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *sweep {
		if err := testenv.SweepNode(ctx, time.Minute); err != nil {
			slog.Error("sweep", "err", err)
			os.Exit(1)
		}
		slog.Info("no test node's changes are left on this machine")
		return
	}

	opts := testenv.Options{}
	what := "etcd, kube-apiserver and the Gateway API CRDs"
	if *node {
		if err := testenv.NodeSupported(); err != nil {
			slog.Error("start a node", "err", err)
			os.Exit(1)
		}
		opts.Node = &testenv.NodeOptions{}
		what += ", and a node"
	}
	slog.Info("starting " + what)
	cp, err := testenv.Start(ctx, opts)
	if err != nil {
		slog.Error("start control plane", "err", err)
		os.Exit(1)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			slog.Error("stop", "err", err)
		}
	}()

	fmt.Printf(`
The local control plane is running (etcd + kube-apiserver, RBAC on, Gateway API CRDs served).

  API server:  %s
  kubeconfig:  %s   (admin, group system:masters)

  export KUBECONFIG=%s
`, cp.Config.Host, cp.Kubeconfig, cp.Kubeconfig)
	if n := cp.Node; n != nil {
		fmt.Printf(`
Node %s is Ready (started in %v): pods get addresses in %s, Services in %s.

  kubectl get pods -A -o wide
  kubectl logs POD
  ctr --address %s/containerd/containerd.sock -n k8s.io images list
  component logs: %s/logs/
`, n.Name, n.StartTime.Round(100*time.Millisecond), testenv.PodCIDR, testenv.ServiceCIDR, n.Dir, n.Dir)
	}
	fmt.Println("\nPress Ctrl-C to stop it; everything it wrote or changed is removed.")
	<-ctx.Done()
	slog.Info("stopping the control plane")
}
