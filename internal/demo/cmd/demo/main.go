// Command demo is `make demo`: the whole varnishgw path on one machine.
//
// It starts the local control plane (etcd + kube-apiserver with the
// Gateway API CRDs), starts echo backends and registers them as Services
// and EndpointSlices (there is no kubelet: see package demo), applies
// examples/demo with the real terraform or tofu CLI and this repository's
// provider, runs the gateway's chaperone with varnishd and ghost exactly as
// its pod would, prints curl commands with their live answers, and serves
// until Ctrl-C, which drains the gateway and stops everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/tfcli"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnishd/varnishdtest"
)

func main() {
	bin := flag.String("bin", "bin", "directory with the built terraform-provider-varnishgw and chaperone binaries (make build)")
	example := flag.String("example", "examples/demo", "the Terraform configuration to apply")
	port := flag.Int("port", 8080, "port of the gateway's HTTP listener (on 127.0.0.1)")
	once := flag.Bool("once", false, "stop after printing the answers instead of serving until Ctrl-C")
	var ports demo.ChaperoneOptions
	flag.StringVar(&ports.HealthAddr, "health-addr", "", "the chaperone's --health-addr (default: the pod's, :9091 on 127.0.0.1)")
	flag.StringVar(&ports.AdminAddr, "admin-addr", "", "the chaperone's --admin-addr (default: the pod's)")
	flag.StringVar(&ports.GhostAdminAddr, "ghost-admin-addr", "", "the chaperone's --ghost-admin-addr (default: the pod's)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *example, *port, *once, ports); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin, example string, port int, once bool, ports demo.ChaperoneOptions) error {
	if os.Geteuid() != 0 {
		return demo.ErrNotRoot
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "varnishgw-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o755); err != nil { // varnishd's user vcache reads VCL and the VMOD here
		return err
	}

	step("starting the local control plane (etcd, kube-apiserver, Gateway API CRDs)")
	cp, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return fmt.Errorf("start the control plane: %w", err)
	}
	defer cp.Stop()

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
	for svc, names := range services {
		var bs []*demo.Backend
		for _, n := range names {
			b, err := demo.StartBackend(n, ip)
			if err != nil {
				return err
			}
			defer b.Close()
			bs = append(bs, b)
			fmt.Printf("    %-13s %s (Service %s/%s port 80)\n", n, b.Addr(), ns, svc)
		}
		if err := demo.RegisterService(ctx, cp.Client, ns, svc, 80, bs...); err != nil {
			return err
		}
	}

	step("terraform apply of %s", example)
	tfDir := filepath.Join(work, "tf")
	if err := os.Mkdir(tfDir, 0o755); err != nil {
		return err
	}
	tf, err := tfcli.New(ctx, tfcli.Options{Dir: tfDir, ProviderDir: bin, Log: os.Stdout})
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(example, "*.tf"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no *.tf files in %s", example)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := tf.WriteFile(filepath.Base(f), string(b)); err != nil {
			return err
		}
	}
	if err := tf.Apply(ctx, "-var", "kubeconfig="+cp.Kubeconfig, "-var", "namespace="+ns, "-var", fmt.Sprintf("port=%d", port)); err != nil {
		return err
	}

	step("running the gateway's chaperone (with varnishd and ghost) as its pod would, as ServiceAccount %s/%s", ns, routing.RuntimeName(routing.ObjectRef{Namespace: ns, Name: "demo"}))
	gw := routing.ObjectRef{Namespace: ns, Name: "demo"}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, routing.RuntimeName(gw))
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
	ch, err := demo.StartChaperone(ctx, cp.Client, demo.ChaperoneOptions{
		Binary: filepath.Join(bin, "chaperone"), Gateway: gw, Kubeconfig: kubeconfig,
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

	addr := fmt.Sprintf("127.0.0.1:%d", port)
	step("the gateway serves on %s; try:", addr)
	for _, r := range []demo.Request{
		{Host: "www.demo.local", Path: "/"},
		{Host: "www.demo.local", Path: "/catalog"},
		{Host: "api.demo.local", Path: "/v2/items", Headers: map[string]string{"x-beta": "1"}},
		{Host: "api.demo.local", Path: "/v2/items"},
		{Host: "unknown.demo.local", Path: "/"},
	} {
		a, err := r.Do(addr)
		if err != nil {
			return err
		}
		fmt.Printf("\n    %s\n    → %s\n", r.Curl(addr), a)
	}
	split := demo.Request{Host: "api.demo.local", Path: "/"}
	counts, err := split.Spread(addr, 200)
	if err != nil {
		return err
	}
	fmt.Printf("\n    200 × %s\n    → %s\n", split.Curl(addr), spread(counts))
	fmt.Printf("\n    kubectl --kubeconfig %s get gateways,httproutes -A\n", cp.Kubeconfig)
	health := ports.HealthAddr
	if health == "" {
		health = "127.0.0.1:9091"
	}
	fmt.Printf("    curl -s http://%s/metrics | grep varnish_ghost_requests\n", health)

	if !once {
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

func step(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

func spread(counts map[string]int) string {
	bySvc := map[string]int{} // api-1 and api-2 are pods of Service api
	for n, c := range counts {
		bySvc[strings.TrimRight(strings.TrimRight(n, "0123456789"), "-")] += c
	}
	counts = bySvc
	var names []string
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s: %d", n, counts[n]))
	}
	return strings.Join(parts, ", ")
}
