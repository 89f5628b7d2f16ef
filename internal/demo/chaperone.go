package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// ChaperoneContainer is the name of the chaperone's container in a gateway
// Deployment.
const ChaperoneContainer = "chaperone"

// PodCommand is the chaperone container of gw's Deployment as the provider
// wrote it: its arguments (after the command, or the image's entrypoint
// when the container has none) and its environment
// (literal values; the downward API fields a pod would resolve for
// metadata.name and metadata.namespace are resolved to podName and gw's
// namespace, and metadata.uid is left out: there is no Pod object).
func PodCommand(ctx context.Context, kube kubernetes.Interface, gw object.Ref, podName string) ([]string, []string, error) {
	name := gwruntime.Name(gw)
	dep, err := kube.AppsV1().Deployments(gw.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("read the Deployment %s/%s of Gateway %s: %w", gw.Namespace, name, gw, err)
	}
	var c *corev1.Container
	for i := range dep.Spec.Template.Spec.Containers {
		if dep.Spec.Template.Spec.Containers[i].Name == ChaperoneContainer {
			c = &dep.Spec.Template.Spec.Containers[i]
		}
	}
	if c == nil {
		return nil, nil, fmt.Errorf("the Deployment %s/%s has no container named %q", gw.Namespace, name, ChaperoneContainer)
	}
	var argv []string
	if len(c.Command) > 1 {
		argv = append(argv, c.Command[1:]...)
	}
	argv = append(argv, c.Args...)
	if len(argv) == 0 {
		return nil, nil, fmt.Errorf("the chaperone container of Deployment %s/%s has no arguments", gw.Namespace, name)
	}
	var env []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+podName)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+gw.Namespace)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.uid":
			// No Pod object: the chaperone's report has no owner.
		}
	}
	return argv, env, nil
}

// ChaperoneOptions say how to run a gateway pod's chaperone on this machine.
type ChaperoneOptions struct {
	// Binary is the chaperone executable (BuildChaperone).
	Binary string
	// Gateway is the Gateway whose Deployment gives the command line.
	Gateway object.Ref
	// Kubeconfig is the gateway ServiceAccount's kubeconfig (in a pod: the
	// mounted token).
	Kubeconfig string
	// Dir is a directory readable by others (varnishd compiles VCL as
	// user vcache): the work dir and ghost.json go under it.
	Dir string
	// VMODDir holds libvmod_ghost.so (varnishdtest.BuildGhost); it goes
	// in front of varnishd's vmod_path.
	VMODDir string
	// HealthAddr, AdminAddr and GhostAdminAddr replace the pod's fixed
	// ports when set (tests use free ones); ListenHost binds the
	// listeners to one address (the demo: 127.0.0.1).
	HealthAddr, AdminAddr, GhostAdminAddr, ListenHost string
	// Stderr receives the chaperone's JSON logs.
	Stderr io.Writer
	// PodName is the pod the chaperone plays (its GatewayPodReport's
	// name); "demo-0" when empty.
	PodName string
}

// Chaperone is a running chaperone process.
type Chaperone struct {
	cmd        *exec.Cmd
	done       chan struct{}
	err        error
	healthAddr string
	// Args is the command line it was started with.
	Args []string
}

// StartChaperone starts the chaperone with the command line and
// environment of gw's Deployment, plus the overrides of opts (later flags
// win). It returns once the process runs; Ready waits for /readyz.
func StartChaperone(ctx context.Context, kube kubernetes.Interface, opts ChaperoneOptions) (*Chaperone, error) {
	pod := opts.PodName
	if pod == "" {
		pod = "demo-0"
	}
	argv, env, err := PodCommand(ctx, kube, opts.Gateway, pod)
	if err != nil {
		return nil, err
	}
	vmodPath := opts.VMODDir
	if out, err := exec.Command("pkg-config", "--variable=vmoddir", "varnishapi").Output(); err == nil {
		vmodPath += ":" + strings.TrimSpace(string(out))
	}
	workdir := filepath.Join(opts.Dir, "varnishd")
	args := append(argv,
		"--kubeconfig="+opts.Kubeconfig,
		"--workdir="+workdir,
		"--ghost-json="+filepath.Join(workdir, "ghost.json"),
		"--param=vmod_path="+vmodPath,
		// The pod's memory-backed TLS volume: hitch's configuration, the
		// certificates and varnishd's TLS sockets.
		"--tls-dir="+filepath.Join(opts.Dir, "tls"),
	)
	health := "127.0.0.1:9091"
	for _, o := range []struct{ flag, v string }{
		{"--health-addr", opts.HealthAddr}, {"--admin-addr", opts.AdminAddr},
		{"--ghost-admin-addr", opts.GhostAdminAddr}, {"--listen-host", opts.ListenHost},
	} {
		if o.v != "" {
			args = append(args, o.flag+"="+o.v)
		}
	}
	if opts.HealthAddr != "" {
		health = opts.HealthAddr
	}
	cmd := exec.Command(opts.Binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = opts.Stderr, opts.Stderr
	// Its own process group, so that Kill can end varnishd too (varnishd's
	// manager drops the parent-death signal when it changes credentials).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the chaperone %s: %w", opts.Binary, err)
	}
	c := &Chaperone{cmd: cmd, done: make(chan struct{}), healthAddr: health, Args: append([]string{opts.Binary}, args...)}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	return c, nil
}

// Ready waits until the chaperone's /readyz answers 200 (varnishd runs,
// main.vcl and the first routing are loaded).
func (c *Chaperone) Ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no answer"
	for {
		select {
		case <-c.done:
			return fmt.Errorf("the chaperone exited before it was ready: %v", c.err)
		case <-ctx.Done():
			return fmt.Errorf("the chaperone was not ready after %s: /readyz: %s", timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get("http://" + c.healthAddr + "/readyz")
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
}

// Stop sends SIGTERM (the chaperone drains the client sessions and stops
// varnishd) and waits up to timeout for it to exit; then it kills the
// process group. It returns the exit error (nil: exit status 0).
func (c *Chaperone) Stop(timeout time.Duration) error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		c.Kill()
		return fmt.Errorf("the chaperone did not exit within %s of SIGTERM", timeout)
	}
}

// Kill ends the chaperone and everything it started at once, varnishd
// included (its manager leaves the chaperone's process group and drops the
// parent-death signal, so the whole process tree is killed).
func (c *Chaperone) Kill() {
	select {
	case <-c.done:
		return
	default:
	}
	varnishdtest.KillTree(c.cmd.Process.Pid)
	<-c.done
}

// Exited is closed when the process has exited.
func (c *Chaperone) Exited() <-chan struct{} { return c.done }

// BuildChaperone builds the chaperone binary of the module in root into
// dir and returns its path.
func BuildChaperone(root, dir string) (string, error) {
	bin := filepath.Join(dir, "chaperone")
	cmd := exec.Command("go", "build", "-o", bin, "./chaperone")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./chaperone: %w\n%s", err, out)
	}
	return bin, nil
}

// ErrNotRoot explains why the demo needs root.
var ErrNotRoot = errors.New("the demo runs varnishd, which drops privileges to user vcache: run it as root (in a container or a VM)")
