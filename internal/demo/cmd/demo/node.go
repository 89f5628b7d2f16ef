package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/imagebuild"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// nodeReplicas is the number of gateway pods in node mode.
const nodeReplicas = 2

// runNode is node mode: the images, a single-node cluster on this machine,
// echo backend pods behind Services, and the gateway as pods of its image.
func runNode(ctx context.Context, cfg config) error {
	images, err := nodeImages(ctx, cfg)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "varnishgw-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	step("starting a single-node Kubernetes on this machine: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet and kube-proxy (what it changes on the machine is undone when the demo stops)")
	cp, err := testenv.Start(ctx, testenv.Options{Node: &testenv.NodeOptions{}})
	if err != nil {
		return fmt.Errorf("start the control plane and the node: %w", err)
	}
	defer func() {
		step("stopping the node and the control plane")
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stop:", err)
		}
	}()
	node := cp.Node
	for _, img := range []imagebuild.Info{images.Gateway, images.Echo} {
		if _, err := node.ImportImage(ctx, img.ArchivePath()); err != nil {
			return err
		}
		fmt.Printf("    imported %s into the node's containerd\n", img.Name)
	}

	const ns = "demo"
	step("running echo backend pods (image %s) behind the Services web, api, api-canary and api-beta in namespace %s", images.Echo.Name, ns)
	if err := demo.EnsureNamespace(ctx, cp.Client, ns); err != nil {
		return err
	}
	backends := []struct {
		name     string
		replicas int32
	}{{"web", 2}, {"api", 2}, {"api-canary", 1}, {"api-beta", 1}}
	for _, b := range backends {
		if err := demo.DeployEcho(ctx, cp.Client, ns, b.name, images.Echo.Name, b.replicas); err != nil {
			return err
		}
	}
	for _, b := range backends {
		if _, err := node.WaitPodsReady(ctx, ns, "app="+b.name, int(b.replicas)); err != nil {
			return err
		}
	}

	cert, err := demoCertificate(ctx, cp.Client, ns, work)
	if err != nil {
		return err
	}
	if err := applyExample(ctx, cfg, work, cp.Kubeconfig, ns, "image="+images.Gateway.Name,
		"wait_for_rollout=true", fmt.Sprintf("replicas=%d", nodeReplicas)); err != nil {
		return err
	}

	gw := object.Ref{Namespace: ns, Name: "demo"}
	pods, err := gatewayPods(ctx, cp.Client, gw)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		return errors.New("the gateway has no pods after terraform apply")
	}
	step("the gateway runs as %d pods of %s:", len(pods), images.Gateway.Name)
	for _, p := range pods {
		fmt.Printf("    %s  %s  Ready\n", p.Name, p.Status.PodIP)
	}
	// The apply waited for the pods; the routes, written after the
	// Gateway, reach each pod's routing moments later.
	if err := waitServed(ctx, pods, cfg.port, time.Minute); err != nil {
		return err
	}
	svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, gwruntime.Name(gw), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read the gateway's Service: %w", err)
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(cfg.port))
	serviceOf, err := echoServices(ctx, cp.Client, ns)
	if err != nil {
		return err
	}
	step("the gateway's Service %s/%s serves on %s (kube-proxy sends each connection to one of its pods); try:", ns, svc.Name, addr)
	if err := showRequests(addr, func(backend string) string { return serviceOf[backend] }); err != nil {
		return err
	}
	if err := showHTTPS(net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(cfg.httpsPort)), cert, 30*time.Second); err != nil {
		return err
	}

	kubectl := fmt.Sprintf("%s --kubeconfig %s", kubectlPath(), cp.Kubeconfig)
	step("see the pods, their logs and the Gateway API objects:")
	for _, c := range []string{
		fmt.Sprintf("%s get pods -n %s -o wide", kubectl, ns),
		fmt.Sprintf("%s logs -n %s deployment/%s -c chaperone", kubectl, ns, gwruntime.Name(gw)),
		fmt.Sprintf("%s describe pod -n %s %s", kubectl, ns, pods[0].Name),
		fmt.Sprintf("%s get gateways,httproutes -n %s", kubectl, ns),
		fmt.Sprintf("curl -s http://%s/metrics | grep varnish_ghost_requests", net.JoinHostPort(pods[0].Status.PodIP, "9091")),
	} {
		fmt.Printf("    %s\n", c)
	}

	if !cfg.once {
		step("serving until Ctrl-C")
		<-ctx.Done()
	}
	step("draining the gateway's pods (SIGTERM: each closes its client connections after their current response, then exits)")
	stopCtx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return drainGateway(stopCtx, cp.Client, gw)
}

// waitServed waits until every pod routes both demo hosts to a backend.
func waitServed(ctx context.Context, pods []corev1.Pod, port int, timeout time.Duration) error {
	for _, p := range pods {
		addr := net.JoinHostPort(p.Status.PodIP, fmt.Sprint(port))
		for _, r := range []demo.Request{{Host: "www.demo.local", Path: "/"}, {Host: "api.demo.local", Path: "/"}} {
			var last string
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
				a, err := r.Do(addr)
				if err != nil {
					last = err.Error()
					return false, nil
				}
				last = a.String()
				return a.Backend != "", nil
			})
			if err != nil {
				return fmt.Errorf("the gateway pod %s does not route %s within %s (last answer: %s): %w", p.Name, r.Curl(addr), timeout, last, err)
			}
		}
	}
	return nil
}

// nodeImages builds the images into bin/images, or reads those of
// cfg.images.
func nodeImages(ctx context.Context, cfg config) (*demo.Images, error) {
	if cfg.images != "" {
		step("using the images in %s", cfg.images)
		return demo.LoadImages(cfg.repo, cfg.images)
	}
	out := filepath.Join(cfg.repo, "bin", "images")
	step("building the gateway and echo images into %s (make image: about 5 minutes the first time, seconds later)", out)
	opts := imagebuild.Options{Repo: cfg.repo, Out: out, Cache: imagebuild.DefaultCache(), Log: os.Stdout}
	if _, err := imagebuild.Build(ctx, opts); err != nil {
		return nil, fmt.Errorf("build the images: %w", err)
	}
	return demo.LoadImages(cfg.repo, out)
}

// gatewayPods lists gw's pods, sorted by name.
func gatewayPods(ctx context.Context, kube kubernetes.Interface, gw object.Ref) ([]corev1.Pod, error) {
	list, err := kube.CoreV1().Pods(gw.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.Labels(gw)).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the gateway's pods: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// echoServices maps the echo pods of ns (whose names they answer with) to
// their Services (the pods' app label).
func echoServices(ctx context.Context, kube kubernetes.Interface, ns string) (map[string]string, error) {
	list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app"})
	if err != nil {
		return nil, fmt.Errorf("list the echo pods: %w", err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = p.Labels["app"]
	}
	return out, nil
}

// drainGateway scales gw's Deployment to zero and waits until its pods are
// gone: each gets SIGTERM, and its chaperone drains varnishd first.
func drainGateway(ctx context.Context, kube kubernetes.Interface, gw object.Ref) error {
	deployments := kube.AppsV1().Deployments(gw.Namespace)
	scale, err := deployments.GetScale(ctx, gwruntime.Name(gw), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("drain the gateway: %w", err)
	}
	scale.Spec.Replicas = 0
	if _, err := deployments.UpdateScale(ctx, gwruntime.Name(gw), scale, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("drain the gateway: %w", err)
	}
	start := time.Now()
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := gatewayPods(ctx, kube, gw)
		return err == nil && len(pods) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("drain the gateway: its pods were still there after %s: %w", time.Since(start).Round(time.Second), err)
	}
	fmt.Printf("    the gateway's pods drained and exited in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// kubectlPath is the kubectl that make setup built, or kubectl from PATH.
func kubectlPath() string {
	if dir := os.Getenv(testenv.EnvKubeBinDir); dir != "" {
		if p := filepath.Join(dir, "kubectl"); isExecutable(p) {
			return p
		}
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	return "kubectl"
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&0o111 != 0
}
