package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

var httpClient = &http.Client{Timeout: 2 * time.Second}

// get returns the body of a GET of url, trimmed.
func get(url string) (string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = &httpError{resp.Status}
	}
	return strings.TrimSpace(string(body)), err
}

type httpError struct{ status string }

func (e *httpError) Error() string { return e.status }

// eventually GETs url until it answers 200, within timeout.
func eventually(t *testing.T, timeout time.Duration, url string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		body, err := get(url)
		if err == nil {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func httpdDeployment(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "httpd"}
	grace := int64(1)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "httpd"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name:            "httpd",
						Image:           httpdImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/index.html", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
}

// TestDeployment runs a Deployment of an image imported from an archive:
// its pods become Ready through their readiness probes, answer on their
// pod IPs and through their Service's ClusterIP (kube-proxy), show their
// logs and run commands through the API server and the kubelet, reach the
// API server through the kubernetes Service with their ServiceAccount
// token, follow scaling, and go away with their namespace.
func TestDeployment(t *testing.T) {
	node := testenv.GetNode(t)
	cp := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	apps, core := cp.Client.AppsV1(), cp.Client.CoreV1()

	archive := filepath.Join(t.TempDir(), "httpd.tar")
	writeHTTPDImage(t, archive, httpdImage)
	names, err := node.ImportImage(ctx, archive)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, httpdImage) {
		t.Fatalf("imported %v, want %s", names, httpdImage)
	}

	ns := "nodetest-deployment"
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := apps.Deployments(ns).Create(ctx, httpdDeployment(2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := core.Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "httpd"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "httpd"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := node.WaitPodsReady(ctx, ns, "app=httpd", 2)
	if err != nil {
		t.Fatal(err)
	}

	// Pod IPs, from this machine.
	names = nil
	for _, p := range pods {
		if _, podNet, _ := net.ParseCIDR(testenv.PodCIDR); !podNet.Contains(net.ParseIP(p.Status.PodIP)) || p.Spec.NodeName != testenv.NodeName {
			t.Errorf("pod %s has IP %q on node %q, want one in %s on %s", p.Name, p.Status.PodIP, p.Spec.NodeName, testenv.PodCIDR, testenv.NodeName)
		}
		if got := eventually(t, 10*time.Second, "http://"+p.Status.PodIP+":8080/cgi-bin/hostname"); got != p.Name {
			t.Errorf("pod %s at %s answered %q", p.Name, p.Status.PodIP, got)
		}
		names = append(names, p.Name)
	}

	// The Service's ClusterIP reaches both pods.
	if _, services, _ := net.ParseCIDR(testenv.ServiceCIDR); !services.Contains(net.ParseIP(svc.Spec.ClusterIP)) {
		t.Errorf("Service ClusterIP %s, want one in %s", svc.Spec.ClusterIP, testenv.ServiceCIDR)
	}
	seen := map[string]bool{}
	for i := 0; len(seen) < 2 && i < 200; i++ {
		body, err := get("http://" + svc.Spec.ClusterIP + "/cgi-bin/hostname")
		if err == nil {
			if !slices.Contains(names, body) {
				t.Fatalf("the Service answered %q, not one of its pods %v", body, names)
			}
			seen[body] = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(seen) != 2 {
		t.Errorf("the Service's ClusterIP reached pods %v, want both of %v", seen, names)
	}

	// Logs and exec through the API server and the kubelet.
	logs, err := node.PodLogs(ctx, ns, pods[0].Name, "httpd")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "/cgi-bin/hostname") {
		t.Errorf("the log of pod %s does not show the requests; it is:\n%s", pods[0].Name, logs)
	}
	out, _, err := node.Exec(ctx, ns, pods[0].Name, "httpd", "hostname")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != pods[0].Name {
		t.Errorf("hostname in pod %s: %q", pods[0].Name, out)
	}

	// The pod's ServiceAccount volume has the cluster's CA
	// (kube-root-ca.crt, published by kube-controller-manager) and a
	// token the API server accepts through the kubernetes Service.
	ca, _, err := node.Exec(ctx, ns, pods[0].Name, "httpd", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	if ca != string(cp.Config.CAData) {
		t.Errorf("the pod's ca.crt is not the control plane's CA:\n%s", ca)
	}
	whoami, _, err := node.Exec(ctx, ns, pods[0].Name, "httpd", "incluster")
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + ns + ":default"; strings.TrimSpace(whoami) != want {
		t.Errorf("the pod's SelfSubjectReview through the kubernetes Service (%s) says %q, want %q", testenv.KubernetesServiceIP, whoami, want)
	}

	// Scale up, then down: the Service follows.
	scale := func(n int32) []corev1.Pod {
		t.Helper()
		// The deployment controller writes the object too: read and
		// write again on a conflict.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := apps.Deployments(ns).GetScale(ctx, "httpd", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = n
			_, err = apps.Deployments(ns).UpdateScale(ctx, "httpd", s, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatalf("scale the httpd Deployment to %d: %v", n, err)
		}
		pods, err := node.WaitPodsReady(ctx, ns, "app=httpd", int(n))
		if err != nil {
			t.Fatal(err)
		}
		return pods
	}
	scale(3)
	pods = scale(1)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for range 10 {
			if body, err := get("http://" + svc.Spec.ClusterIP + "/cgi-bin/hostname"); err != nil || body != pods[0].Name {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Errorf("after scaling to 1, the Service does not answer from %s alone: %v", pods[0].Name, err)
	}

	// The namespace goes, and its pods with it.
	if err := core.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		ns, _ := core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
		t.Fatalf("namespace %s not deleted within 2 minutes: %v; status: %+v", ns.Name, err, ns.Status)
	}
	if _, err := get("http://" + pods[0].Status.PodIP + ":8080/index.html"); err == nil {
		t.Errorf("pod %s still answers at %s after its namespace was deleted", pods[0].Name, pods[0].Status.PodIP)
	}
}

// TestPullFromRegistry pushes an image to a registry (plain HTTP) and runs
// pods that the node pulls it for: from the registry's loopback address
// as it is (containerd speaks plain HTTP to localhost and 127.0.0.1), from
// another address once AllowInsecureRegistry allows it, and not before.
func TestPullFromRegistry(t *testing.T) {
	node := testenv.GetNode(t)
	cp := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var log syncBuffer
	handler := registry.New(registry.Logger(stdlog.New(&log, "", 0)))
	loopback := httptest.NewServer(handler)
	defer loopback.Close()
	// The same registry on the node's address: not loopback.
	l, err := net.Listen("tcp", net.JoinHostPort(node.IP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	other := &httptest.Server{Listener: l, Config: &http.Server{Handler: handler}}
	other.Start()
	defer other.Close()

	archive := filepath.Join(t.TempDir(), "httpd.tar")
	// Its own config, so that the node pulls it and does not find it.
	writeHTTPDImage(t, archive, httpdImage, "PUSHED_BY="+t.Name())
	loopbackHost := strings.TrimPrefix(loopback.URL, "http://")
	otherHost := strings.TrimPrefix(other.URL, "http://")
	push, err := name.NewTag(loopbackHost+"/nodetest/httpd:pushed", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(push, imageFromArchive(t, archive), remote.WithContext(ctx)); err != nil {
		t.Fatalf("push %s: %v", push, err)
	}

	ns := cp.Namespace(t)
	run := func(podName, image string) ([]corev1.Pod, error) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: map[string]string{"app": podName}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "httpd", Image: image, ImagePullPolicy: corev1.PullAlways,
			}}},
		}
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return node.WaitPodsReady(ctx, ns, "app="+podName, 1)
	}

	pods, err := run("loopback", push.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := eventually(t, 10*time.Second, "http://"+pods[0].Status.PodIP+":8080/cgi-bin/hostname"); got != "loopback" {
		t.Errorf("the pulled image's pod answered %q", got)
	}
	if !strings.Contains(log.String(), "GET /v2/nodetest/httpd/manifests/sha256:") {
		t.Errorf("the node did not fetch the image's manifest from the registry; the registry's log:\n%s", log.String())
	}
	images, err := node.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(images, push.String()) {
		t.Errorf("the node's images %v lack %s", images, push)
	}

	otherImage := otherHost + "/nodetest/httpd:pushed"
	if _, err := run("refused", otherImage); err == nil || !strings.Contains(err.Error(), "ErrImagePull") && !strings.Contains(err.Error(), "ImagePullBackOff") {
		t.Errorf("a pull from %s (plain HTTP, not loopback) without AllowInsecureRegistry: got %v, want ErrImagePull", otherHost, err)
	}
	if err := node.AllowInsecureRegistry(otherHost); err != nil {
		t.Fatal(err)
	}
	if _, err := run("allowed", otherImage); err != nil {
		t.Errorf("a pull from %s with AllowInsecureRegistry: %v", otherHost, err)
	}
}

// syncBuffer is a bytes.Buffer for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestOneNodeAtATime starts a second node, in a child test binary, while
// this binary's node runs: it waits for the node lock, then fails naming
// this binary as the holder.
func TestOneNodeAtATime(t *testing.T) {
	testenv.GetNode(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondNodeHelper$", "-test.v")
	cmd.Env = append(os.Environ(), envHelperMode+"=second")
	start := time.Now()
	out, _ := cmd.CombinedOutput()
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("the second node gave up after %v, before its lock timeout of 3s", took)
	}
	for _, want := range []string{"another test node runs on this machine", fmt.Sprintf("held by pid %d", os.Getpid()), "one node runs at a time", "--- PASS: TestSecondNodeHelper"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the second node's start lacks %q:\n%s", want, out)
		}
	}
}

// TestSecondNodeHelper is the child of TestOneNodeAtATime.
func TestSecondNodeHelper(t *testing.T) {
	if os.Getenv(envHelperMode) != "second" {
		t.Skip("runs only as the child of TestOneNodeAtATime")
	}
	cp, err := testenv.Start(context.Background(), testenv.Options{Node: &testenv.NodeOptions{LockTimeout: 3 * time.Second}})
	if err == nil {
		t.Errorf("a second node started (stopping it: %v)", cp.Stop())
		t.FailNow()
	}
	t.Log(err)
}
