// Command demo is `make demo`: the whole varnishgw path on one machine.
//
// On a machine that can run a Kubernetes node (root, cgroups: see
// testenv.NodeSupported) it builds the gateway and echo images (make
// image), starts a single-node cluster (package testenv), runs echo backend
// pods behind Services, applies examples/demo with the real terraform or
// tofu CLI and this repository's provider, and the gateway runs as real
// pods of the image. Elsewhere it falls back to host mode, saying why: the
// control plane without a node, echo backends as processes registered as
// Services and EndpointSlices, and the gateway's chaperone with varnishd and
// ghost started on this machine exactly as its pod would run it.
//
// Either way it prints curl commands with their live answers, and serves
// until Ctrl-C, which drains the gateway and stops everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

// Modes of the demo.
const (
	modeAuto = "auto"
	modeNode = "node"
	modeHost = "host"
)

// config is the demo's command line.
type config struct {
	mode    string
	bin     string
	repo    string
	example string
	images  string
	port    int
	// httpsPort is the HTTPS listener's port.
	httpsPort int
	once      bool
	// ports replace the pod's fixed ports of the chaperone in host mode.
	ports demo.ChaperoneOptions
}

func main() {
	var cfg config
	flag.StringVar(&cfg.mode, "mode", modeAuto, "where the gateway runs: node (real pods on a single-node Kubernetes on this machine), host (the chaperone as a process on this machine), or auto: node where this machine can run one, else host")
	flag.StringVar(&cfg.bin, "bin", "bin", "directory with the built terraform-provider-varnishgw and chaperone binaries (make build)")
	flag.StringVar(&cfg.repo, "repo", ".", "the repository's root, which node mode builds the images from")
	flag.StringVar(&cfg.example, "example", "examples/demo", "the Terraform configuration to apply")
	flag.StringVar(&cfg.images, "images", "", "node mode: use the images make image already built in this directory instead of building them into bin/images")
	flag.IntVar(&cfg.port, "port", 8080, "port of the gateway's HTTP listener (host mode: on 127.0.0.1)")
	flag.IntVar(&cfg.httpsPort, "https-port", 8443, "port of the gateway's HTTPS listener (host mode: on 127.0.0.1)")
	flag.BoolVar(&cfg.once, "once", false, "stop after printing the answers instead of serving until Ctrl-C")
	flag.StringVar(&cfg.ports.HealthAddr, "health-addr", "", "host mode: the chaperone's --health-addr (default: the pod's, :9091 on 127.0.0.1)")
	flag.StringVar(&cfg.ports.AdminAddr, "admin-addr", "", "host mode: the chaperone's --admin-addr (default: the pod's)")
	flag.StringVar(&cfg.ports.GhostAdminAddr, "ghost-admin-addr", "", "host mode: the chaperone's --ghost-admin-addr (default: the pod's)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	var err error
	if cfg.bin, err = filepath.Abs(cfg.bin); err != nil {
		return err
	}
	switch cfg.mode {
	case modeNode:
		return runNode(ctx, cfg)
	case modeHost:
		return runHost(ctx, cfg)
	case modeAuto:
		if err := testenv.NodeSupported(); err != nil {
			step("the gateway runs on this machine instead of in a pod (host mode), because %v", err)
			return runHost(ctx, cfg)
		}
		return runNode(ctx, cfg)
	default:
		return fmt.Errorf("-mode=%q: want node, host or auto", cfg.mode)
	}
}

// applyExample runs terraform apply of cfg.example in a new workspace under
// work, with the variables vars ("name=value") after kubeconfig, namespace,
// port and https_port.
func applyExample(ctx context.Context, cfg config, work, kubeconfig, ns string, vars ...string) error {
	step("terraform apply of %s", cfg.example)
	tfDir := filepath.Join(work, "tf")
	if err := os.Mkdir(tfDir, 0o755); err != nil {
		return err
	}
	tf, err := tfcli.New(ctx, tfcli.Options{Dir: tfDir, ProviderDir: cfg.bin, Log: os.Stdout})
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(cfg.example, "*.tf"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no *.tf files in %s", cfg.example)
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
	args := []string{"-var", "kubeconfig=" + kubeconfig, "-var", "namespace=" + ns, "-var", fmt.Sprintf("port=%d", cfg.port),
		"-var", fmt.Sprintf("https_port=%d", cfg.httpsPort)}
	for _, v := range vars {
		args = append(args, "-var", v)
	}
	return tf.Apply(ctx, args...)
}

// showRequests sends the demo's requests to the gateway at addr and prints
// them as curl commands with their answers; service names the Service of a
// backend that answered, for the weighted split's counts.
func showRequests(addr string, service func(backend string) string) error {
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
	fmt.Printf("\n    200 × %s\n    → %s\n", split.Curl(addr), spread(counts, service))
	return nil
}

// demoCertificate makes the certificate of the HTTPS listener (the Secret
// demo-tls, issued by a CA made for this run) before the apply.
func demoCertificate(ctx context.Context, kube kubernetes.Interface, ns, work string) (*demo.Certificate, error) {
	step("making a CA for this run and a certificate for *.demo.local, stored as the Secret %s/demo-tls", ns)
	return demo.CreateCertificate(ctx, kube, ns, "demo-tls", work, "*.demo.local", "www.demo.local", "api.demo.local")
}

// showHTTPS sends the demo's HTTPS request to the gateway at addr, retrying
// for up to timeout while hitch starts, and prints it as a curl command
// with its answer.
func showHTTPS(addr string, cert *demo.Certificate, timeout time.Duration) error {
	r := demo.Request{Host: "www.demo.local", Path: "/"}
	deadline := time.Now().Add(timeout)
	for {
		a, proto, err := r.DoTLS(addr, cert.Pool)
		if err == nil && a.Status == 200 {
			fmt.Printf("\n    %s\n    → %s (%s)\n", r.CurlTLS(addr, cert.CAFile), a, proto)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %v %v after %s", r.CurlTLS(addr, cert.CAFile), a, err, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

// spread prints counts of answers per backend as counts per Service.
func spread(counts map[string]int, service func(backend string) string) string {
	bySvc := map[string]int{}
	for n, c := range counts {
		bySvc[service(n)] += c
	}
	var names []string
	for n := range bySvc {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s: %d", n, bySvc[n]))
	}
	return strings.Join(parts, ", ")
}
