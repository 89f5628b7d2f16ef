package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// demoRun is `make demo`'s command running in the background, its output
// collected line by line.
type demoRun struct {
	t    *testing.T
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{} // closed when the process has exited, with err set
	err  error
}

func startDemo(t *testing.T, env []string, args ...string) *demoRun {
	t.Helper()
	bin := providerDir(t)
	args = append([]string{"-bin", bin, "-repo", "..", "-example", "../examples/demo"}, args...)
	cmd := exec.Command(filepath.Join(bin, "demo"), args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &demoRun{t: t, cmd: cmd, done: make(chan struct{})}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			d.mu.Lock()
			d.out.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr) // after a line too long: never block the demo
	}()
	go func() { d.err = cmd.Wait(); pw.Close(); <-scanned; close(d.done) }()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-d.done:
			case <-time.After(2 * time.Minute):
				_ = cmd.Process.Kill()
			}
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", d.output())
		}
	})
	return d
}

func (d *demoRun) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// waitOutput waits until the output contains s.
func (d *demoRun) waitOutput(s string, timeout time.Duration) {
	d.t.Helper()
	deadline := time.After(timeout)
	for {
		if strings.Contains(d.output(), s) {
			return
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-d.done:
			if strings.Contains(d.output(), s) {
				return
			}
			d.t.Fatalf("demo exited (%v) before printing %q", d.err, s)
		case <-deadline:
			d.t.Fatalf("demo did not print %q within %s", s, timeout)
		}
	}
}

// wait waits for the demo to exit and fails the test unless it exits 0.
func (d *demoRun) wait(timeout time.Duration) {
	d.t.Helper()
	select {
	case <-d.done:
		if d.err != nil {
			d.t.Fatalf("demo: %v", d.err)
		}
	case <-time.After(timeout):
		d.t.Fatalf("demo did not exit within %s", timeout)
	}
}

// expectOutput checks the demo's output against regular expressions.
func (d *demoRun) expectOutput(patterns ...string) {
	d.t.Helper()
	out := d.output()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			d.t.Errorf("demo output lacks %q", p)
		}
	}
}

// TestDemoNode runs `make demo`'s command as make demo does on a machine
// that can run a node: the gateway as two real pods of the image make image
// built, on the demo's own single-node cluster, serving the declared
// routes through its Service. The kubectl commands it prints work while it
// serves, and Ctrl-C drains the pods and stops everything.
func TestDemoNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own control plane and node")
	}
	if err := testenv.NodeSupported(); err != nil {
		if os.Getenv(testenv.EnvSkipNode) == "1" {
			t.Skipf("%v (%s=1)", err, testenv.EnvSkipNode)
		}
		t.Fatalf("%v\n(set %s=1 to skip the tests that need a node on such a machine)", err, testenv.EnvSkipNode)
	}
	images := os.Getenv("VARNISHGW_IMAGES")
	if images == "" {
		t.Fatal("VARNISHGW_IMAGES is not set: run the tests with make test, which builds the images with make image")
	}
	// Waits for the node lock while another package's node runs.
	d := startDemo(t, nil, "-images", images)
	d.waitOutput("serving until Ctrl-C", 25*time.Minute)
	d.expectOutput(
		`imported localhost/varnishgw/gateway:\S+ into the node's containerd`,
		`the gateway runs as 2 pods of localhost/varnishgw/gateway:`,
		`-H 'Host: www.demo.local' http://198\.19\.\d+\.\d+:8080/\n\s+→ 200 from backend web-[a-z0-9]+-[a-z0-9]+`,
		`/catalog\n\s+→ 301, Location: http://www.demo.local:8080/products`,
		`-H 'x-beta: 1' http://198\.19\.\d+\.\d+:8080/v2/items\n\s+→ 200 from backend api-beta-`,
		`unknown.demo.local' http://198\.19\.\d+\.\d+:8080/\n\s+→ 404`,
		`→ api: \d+, api-canary: \d+`,
		`curl -si --cacert /\S+/ca\.pem --resolve www\.demo\.local:8443:198\.19\.\d+\.\d+ https://www\.demo\.local:8443/\n\s+→ 200 from backend web-[a-z0-9]+-[a-z0-9]+ \(HTTP/2\.0\)`,
	)

	// The printed commands work while the demo serves.
	var kubectl []string
	for _, l := range strings.Split(d.output(), "\n") {
		if f := strings.Fields(l); len(f) > 3 && strings.HasSuffix(f[0], "kubectl") && f[1] == "--kubeconfig" {
			kubectl = append(kubectl, strings.TrimSpace(l))
		}
	}
	if len(kubectl) < 3 {
		t.Fatalf("the demo printed %d kubectl commands, want at least 3", len(kubectl))
	}
	want := map[string]*regexp.Regexp{
		" get pods ":    regexp.MustCompile(`(?m)^varnishgw-demo-\S+\s+1/1\s+Running`),
		" logs ":        regexp.MustCompile(`"msg":"`),
		" describe pod": regexp.MustCompile(`Image:\s+localhost/varnishgw/gateway:`),
		" get gateways": regexp.MustCompile(`(?m)^gateway\.gateway\.networking\.k8s\.io/demo\s+varnishgw-demo\s.*True`),
	}
	for _, c := range kubectl {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, "sh", "-c", c).CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s: %v\n%s", c, err, out)
			continue
		}
		t.Logf("%s:\n%s", c, out)
		for k, re := range want {
			if strings.Contains(c, k) && !re.Match(out) {
				t.Errorf("%s: output does not match %s:\n%s", c, re, out)
			}
		}
	}

	// The printed HTTPS curl command, with the real curl: HTTP/2, the
	// certificate checked against the demo's CA.
	var curls int
	for _, l := range strings.Split(d.output(), "\n") {
		c := strings.TrimSpace(l)
		if !strings.HasPrefix(c, "curl -si --cacert ") {
			continue
		}
		curls++
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, "sh", "-c", c).CombinedOutput()
		cancel()
		if err != nil || !regexp.MustCompile(`(?mi)^HTTP/2 200`).Match(out) || !regexp.MustCompile(`(?mi)^x-backend: web-`).Match(out) {
			t.Errorf("%s: %v, want HTTP/2 200 from web-*:\n%s", c, err, out)
		}
	}
	if curls != 1 {
		t.Errorf("the demo printed %d HTTPS curl commands, want 1", curls)
	}

	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	d.wait(3 * time.Minute)
	d.expectOutput(
		`draining the gateway's pods`,
		`the gateway's pods drained and exited in`,
		`stopping the node and the control plane`,
	)
}

// TestDemoHostFallback runs `make demo`'s command where no node can run
// (here: the node's binaries are not given): it says why and runs the
// gateway's chaperone on this machine instead (host mode), serving the
// declared routes, and stops cleanly after draining.
func TestDemoHostFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own control plane")
	}
	port := varnishdtest.Port(t, varnishdtest.FreeAddr(t))
	d := startDemo(t, []string{testenv.EnvKubeBinDir + "="}, "-once",
		"-port", strconv.Itoa(port), "-https-port", strconv.Itoa(varnishdtest.Port(t, varnishdtest.FreeAddr(t))),
		"-health-addr", varnishdtest.FreeAddr(t),
		"-admin-addr", varnishdtest.FreeAddr(t), "-ghost-admin-addr", varnishdtest.FreeAddr(t))
	d.wait(5 * time.Minute)
	d.expectOutput(
		`the gateway runs on this machine instead of in a pod \(host mode\), because this machine cannot run a test node: `+testenv.EnvKubeBinDir+` is not set`,
		`-H 'Host: www.demo.local' http://127.0.0.1:\d+/\n\s+→ 200 from backend web-\d`,
		`/catalog\n\s+→ 301, Location: http://www.demo.local(:\d+)?/products`,
		`-H 'x-beta: 1' http://127.0.0.1:\d+/v2/items\n\s+→ 200 from backend api-beta-1`,
		`http://127.0.0.1:\d+/v2/items\n\s+→ 200 from backend api(-canary)?-\d`,
		`unknown.demo.local' http://127.0.0.1:\d+/\n\s+→ 404`,
		`→ api: \d+, api-canary: \d+`,
		`curl -si --cacert /\S+/ca\.pem --resolve www\.demo\.local:\d+:127\.0\.0\.1 https://www\.demo\.local:\d+/\n\s+→ 200 from backend web-\d \(HTTP/2\.0\)`,
		`draining the gateway and stopping everything`,
	)
}
