package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// runHost is host mode: the control plane without a node, echo backends
// as processes on this machine registered as Services with EndpointSlices,
// and the gateway's chaperone started here with its pod's command line.
func runHost(ctx context.Context, cfg config) error {
	work, err := os.MkdirTemp("", "varnishgw-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o755); err != nil { // varnishd's unprivileged user reads VCL and the VMOD here
		return err
	}

	step("starting the local control plane (etcd, kube-apiserver, Gateway API CRDs)")
	cp, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return fmt.Errorf("start the control plane: %w", err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "demo: stop the control plane: %v\n", err)
		}
	}()

	const ns = "demo"
	step("starting echo backends and registering them as Services and EndpointSlices in namespace %s", ns)
	ip, err := varnishdtest.FindHostIP()
	if err != nil {
		return err
	}
	if err := demo.EnsureNamespace(ctx, cp.Client, ns); err != nil {
		return err
	}
	services := map[string][]string{"web": {"web-1", "web-2"}, "api": {"api-1", "api-2"}, "api-canary": {"api-canary-1"}, "api-beta": {"api-beta-1"}}
	serviceOf := map[string]string{}
	for svc, names := range services {
		var bs []*demo.Backend
		for _, n := range names {
			b, err := demo.StartBackend(n, ip)
			if err != nil {
				return err
			}
			defer b.Close()
			bs = append(bs, b)
			serviceOf[n] = svc
			fmt.Printf("    %-13s %s (Service %s/%s port 80)\n", n, b.Addr(), ns, svc)
		}
		if err := demo.RegisterService(ctx, cp.Client, ns, svc, 80, bs...); err != nil {
			return err
		}
	}

	cert, err := demoCertificate(ctx, cp.Client, ns, work)
	if err != nil {
		return err
	}
	if err := applyExample(ctx, cfg, work, cp.Kubeconfig, ns); err != nil {
		return err
	}

	gw := object.Ref{Namespace: ns, Name: "demo"}
	step("running the gateway's chaperone (with varnishd and ghost) as its pod would, as ServiceAccount %s/%s", ns, gwruntime.Name(gw))
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, gwruntime.Name(gw))
	if err != nil {
		return err
	}
	vmodDir := filepath.Join(work, "vmod")
	if err := os.Mkdir(vmodDir, 0o755); err != nil {
		return err
	}
	if _, err := varnishdtest.BuildGhost(vmodDir); err != nil {
		return fmt.Errorf("build the ghost VMOD: %w", err)
	}
	logFile, err := os.Create(filepath.Join(work, "chaperone.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	ports := cfg.ports
	ch, err := demo.StartChaperone(ctx, cp.Client, demo.ChaperoneOptions{
		Binary: filepath.Join(cfg.bin, "chaperone"), Gateway: gw, Kubeconfig: kubeconfig,
		Dir: work, VMODDir: vmodDir, ListenHost: "127.0.0.1", Stderr: logFile,
		HealthAddr: ports.HealthAddr, AdminAddr: ports.AdminAddr, GhostAdminAddr: ports.GhostAdminAddr,
	})
	if err != nil {
		return err
	}
	defer ch.Kill()
	fmt.Printf("    %s\n    logs: %s\n", strings.Join(ch.Args, " "), logFile.Name())
	if err := ch.Ready(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("%w (see %s)", err, logFile.Name())
	}

	addr := fmt.Sprintf("127.0.0.1:%d", cfg.port)
	step("the gateway serves on %s; try:", addr)
	if err := showRequests(addr, func(backend string) string { return serviceOf[backend] }); err != nil {
		return err
	}
	if err := showHTTPS(fmt.Sprintf("127.0.0.1:%d", cfg.httpsPort), cert, 30*time.Second); err != nil {
		return err
	}
	fmt.Printf("\n    %s --kubeconfig %s get gateways,httproutes -A\n", kubectlPath(), cp.Kubeconfig)
	health := ports.HealthAddr
	if health == "" {
		health = "127.0.0.1:9091"
	}
	fmt.Printf("    curl -s http://%s/metrics | grep varnish_ghost_requests\n", health)

	if !cfg.once {
		step("serving until Ctrl-C")
		select {
		case <-ctx.Done():
		case <-ch.Exited():
			return fmt.Errorf("the chaperone exited (see %s)", logFile.Name())
		}
	}
	step("draining the gateway and stopping everything")
	if err := ch.Stop(30 * time.Second); err != nil {
		return fmt.Errorf("stop the chaperone: %w (see %s)", err, logFile.Name())
	}
	slog.Info("stopped")
	return nil
}
