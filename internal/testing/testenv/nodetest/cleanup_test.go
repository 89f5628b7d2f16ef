package nodetest

// This file's tests run first in the package (files and tests run in
// order): they start nodes in child test binaries, which need the machine's
// node lock, which this binary holds once a test has called GetNode.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// The fixed places of the node (package testenv): its directory, its lock
// and its janitor's mark.
const (
	nodeDir      = "/var/lib/varnishgw-testnode"
	nodeLockFile = "/run/lock/varnishgw-testnode.lock"
	janitorEnv   = "VARNISHGW_TESTNODE_JANITOR=1"
)

// Environment of the child test binary.
const (
	envHelperMode = "NODETEST_HELPER"
	envHelperDir  = "NODETEST_DIR"
)

// TestNodeLeavesMachineAsItWas starts a node in a child test binary, runs a
// pod with volumes behind a Service, then ends the child in one of several
// ways, and compares the machine before and after: sysctls, iptables (v4,
// v6), mounts, network interfaces, cgroups, network namespaces, the
// directories a node uses, and the node's and pods' processes.
//
//   - stop: the tests end and testenv.Main stops the node;
//   - sigint: the child is interrupted (Ctrl-C);
//   - panic: a test panics;
//   - sigkill: the child is killed; its janitor undoes the node's changes;
//   - sweep: the child and its janitor are killed; the machine keeps the
//     node's changes until testenv.SweepNode (which every node start runs)
//     undoes them.
func TestNodeLeavesMachineAsItWas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five nodes; skipped with -short")
	}
	if err := testenv.NodeSupported(); err != nil {
		if os.Getenv(testenv.EnvSkipNode) == "1" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if holder, _ := os.ReadFile(nodeLockFile); strings.HasPrefix(string(holder), fmt.Sprintf("%d ", os.Getpid())) && lockHeld() {
		t.Fatal("this test binary holds the node lock already: this test must run before any test that calls testenv.GetNode")
	}
	for _, mode := range []string{"stop", "sigint", "panic", "sigkill", "sweep"} {
		t.Run(mode, func(t *testing.T) { checkNodeCleanup(t, mode) })
	}
}

func checkNodeCleanup(t *testing.T, mode string) {
	dir := t.TempDir()
	// No leftovers of an earlier run may count as this one's.
	if err := testenv.SweepNode(context.Background(), 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t)

	// The child may wait for the node lock (another package's node) up to
	// 20 minutes before its node starts.
	cmd := exec.Command(os.Args[0], "-test.run=^TestNodeHelper$", "-test.v", "-test.timeout=26m")
	cmd.Env = append(os.Environ(), envHelperMode+"="+mode, envHelperDir+"="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	childOutput := func() string { return out.String() }
	defer func() {
		if t.Failed() {
			t.Logf("child output:\n%s", childOutput())
		}
	}()

	// Wait for the child's pod.
	readyFile := filepath.Join(dir, "ready")
	deadline := time.After(25 * time.Minute)
	for ready := false; !ready; {
		select {
		case err := <-exited:
			t.Fatalf("the child ended before its pod was Ready: %v", err)
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("the child's pod was not Ready within 25 minutes")
		case <-time.After(200 * time.Millisecond):
			_, err := os.Stat(readyFile)
			ready = err == nil
		}
	}

	// The snapshot sees the node (or this test could not fail).
	during := takeSnapshot(t)
	procs := nodeProcesses()
	changes := strings.Join(before.diff(during), "\n")
	if testing.Verbose() {
		t.Logf("the running node's changes to the machine:\n%s", changes)
	}
	wants := []string{"+ link: varnishgw0", "KUBE-SERVICES", "+ mount: " + nodeDir + "/", "(nsfs)", "+ cgroup: /sys/fs/cgroup/memory/varnishgw-testnode/kubepods"}
	if before["sysctl: net.ipv4.ip_forward = 0"] {
		wants = append(wants, "+ sysctl: net.ipv4.ip_forward = 1")
	}
	for _, want := range wants {
		if !strings.Contains(changes, want) {
			t.Errorf("the snapshot of the running node lacks %q; changes:\n%s", want, changes)
		}
	}
	var sawPod bool
	for _, p := range procs {
		sawPod = sawPod || strings.Contains(p.cmd, "httpd")
	}
	if !sawPod {
		t.Errorf("no pod process among the node's processes: %v", procs)
	}

	proceed := func() {
		if err := os.WriteFile(filepath.Join(dir, "proceed"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var wantExit string
	switch mode {
	case "stop":
		proceed()
		wantExit = "exit status 0"
	case "panic":
		proceed()
		wantExit = "exit status 2"
	case "sigint":
		cmd.Process.Signal(os.Interrupt)
		wantExit = "exit status 130"
	case "sigkill":
		cmd.Process.Kill()
		wantExit = "signal: killed"
	case "sweep":
		janitor := findJanitor(t)
		syscall.Kill(janitor, syscall.SIGKILL)
		cmd.Process.Kill()
		wantExit = "signal: killed"
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("the child did not end within 5 minutes")
	}
	if got := fmt.Sprint(err); err == nil && wantExit != "exit status 0" || err != nil && got != wantExit {
		t.Errorf("the child ended with %v, want %s", err, wantExit)
	}

	if mode == "sweep" {
		time.Sleep(2 * time.Second)
		if _, err := os.Stat("/sys/class/net/varnishgw0"); err != nil {
			t.Fatalf("with its janitor killed, the node's bridge is gone all the same (%v): this mode tests nothing", err)
		}
		if err := testenv.SweepNode(context.Background(), time.Minute); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	} else {
		waitJanitor(t)
	}

	after := takeSnapshot(t)
	if d := before.diff(after); len(d) > 0 {
		t.Errorf("the machine differs from before the node (- before, + after):\n%s", strings.Join(d, "\n"))
	}
	for _, p := range procs {
		if alive(p) {
			t.Errorf("process %d (%s) of the node still runs", p.pid, p.cmd)
		}
	}
	if left := nodeProcesses(); len(left) > 0 {
		t.Errorf("node processes run after the node: %v", left)
	}
	if _, err := os.Stat(nodeDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there (%v)", nodeDir, err)
	}
}

// lockHeld reports whether some process holds the node lock.
func lockHeld() bool {
	f, err := os.Open(nodeLockFile)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN) // released by the Close too
	return false
}

// waitJanitor waits until the janitor has undone the node's changes and
// let the lock go.
func waitJanitor(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for lockHeld() {
		if time.Now().After(deadline) {
			t.Fatal("the node lock is still held 3 minutes after the child ended: the janitor did not finish")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if log, err := os.ReadFile(filepath.Join(nodeDir, "janitor.log")); err == nil {
		t.Errorf("the janitor left its log, so it failed:\n%s", log)
	}
}

// findJanitor returns the pid of the running node janitor.
func findJanitor(t *testing.T) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == janitorEnv {
				return pid
			}
		}
	}
	t.Fatal("no node janitor runs")
	return 0
}

// TestNodeHelper is the child of TestNodeLeavesMachineAsItWas: it runs a
// pod (the httpd image, with an emptyDir and the ServiceAccount token
// volume) behind a Service, says so, and ends as its mode says.
func TestNodeHelper(t *testing.T) {
	mode, dir := os.Getenv(envHelperMode), os.Getenv(envHelperDir)
	if mode == "" {
		t.Skip("runs only as the child of TestNodeLeavesMachineAsItWas")
	}
	node := testenv.GetNode(t)
	cp := testenv.Get(t)
	ctx := context.Background()
	archive := filepath.Join(t.TempDir(), "httpd.tar")
	writeHTTPDImage(t, archive, httpdImage)
	if _, err := node.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "httpd", Labels: map[string]string{"app": "httpd"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "httpd", Image: httpdImage, ImagePullPolicy: corev1.PullNever,
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
			}},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
		},
	}
	if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "httpd"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "httpd"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := cp.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	pods, err := node.WaitPodsReady(waitCtx, ns, "app=httpd", 1)
	if err != nil {
		t.Fatal(err)
	}
	// kube-proxy has the Service's rules once it answers.
	svc, err = cp.Client.CoreV1().Services(ns).Get(ctx, "httpd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := eventually(t, 30*time.Second, "http://"+svc.Spec.ClusterIP+"/cgi-bin/hostname"); got != pods[0].Name {
		t.Fatalf("the Service answered %q, want %q", got, pods[0].Name)
	}
	info, _ := json.Marshal(map[string]string{"pod": pods[0].Name, "ip": pods[0].Status.PodIP})
	if err := os.WriteFile(filepath.Join(dir, "ready"), info, 0o644); err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "stop", "panic":
		for {
			if _, err := os.Stat(filepath.Join(dir, "proceed")); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if mode == "panic" {
			panic("the node helper panics with a running node")
		}
	default:
		select {} // until a signal
	}
}
