package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("TESTENV_HELPER"); mode != "" {
		helperProcess(mode)
		return
	}
	Main(m)
}

func TestGatewayAPIObjectsRoundTrip(t *testing.T) {
	cp := Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gw := cp.Gateway.GatewayV1()

	class := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: "varnishgw.dev/test"},
	}
	if _, err := gw.GatewayClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create GatewayClass: %v", err)
	}
	t.Cleanup(func() {
		if err := gw.GatewayClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete GatewayClass: %v", err)
		}
	})

	hostname := gatewayv1.Hostname("*.example.com")
	gateway := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(class.Name),
			Listeners: []gatewayv1.Listener{{
				Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType, Hostname: &hostname,
			}},
		},
	}
	if _, err := gw.Gateways(ns).Create(ctx, gateway, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Gateway: %v", err)
	}

	pathType := gatewayv1.PathMatchPathPrefix
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}},
			Hostnames:       []gatewayv1.Hostname{"shop.example.com"},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &pathType, Value: ptr("/cart")}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: "cart", Port: ptr(gatewayv1.PortNumber(80))},
				}}},
			}},
		},
	}
	if _, err := gw.HTTPRoutes(ns).Create(ctx, route, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create HTTPRoute: %v", err)
	}

	gotGW, err := gw.Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Gateway: %v", err)
	}
	if l := gotGW.Spec.Listeners; len(l) != 1 || l[0].Port != 8080 || *l[0].Hostname != hostname {
		t.Errorf("Gateway listeners read back as %+v", l)
	}
	gotRoute, err := gw.HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get HTTPRoute: %v", err)
	}
	m := gotRoute.Spec.Rules[0].Matches[0]
	if *m.Path.Value != "/cart" || *m.Path.Type != gatewayv1.PathMatchPathPrefix {
		t.Errorf("HTTPRoute match read back as %+v", m.Path)
	}
	// The API server defaults the backendRef weight from the CRD schema:
	// proof that the real CRD, not a stand-in, is installed.
	if w := gotRoute.Spec.Rules[0].BackendRefs[0].Weight; w == nil || *w != 1 {
		t.Errorf("backendRef weight = %v, want the CRD default 1", w)
	}

	// The CRD's validation rules run in the API server.
	bad := route.DeepCopy()
	bad.Name = "bad"
	bad.Spec.Rules[0].Matches[0].Path.Value = ptr("no-leading-slash")
	if _, err := gw.HTTPRoutes(ns).Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("create HTTPRoute with path %q: got %v, want an Invalid error from the CRD validation", "no-leading-slash", err)
	}
}

func TestServiceAccountRBAC(t *testing.T) {
	cp := Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)

	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(cfg)

	if _, err := sa.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list configmaps without a RoleBinding: got %v, want Forbidden", err)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chaperone-read-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "chaperone"}},
	}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The RBAC authorizer's cache follows the watch; allow it a moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = sa.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("list configmaps with a RoleBinding: %v", err)
	}

	// The binding grants exactly what the Role says and nothing more.
	if _, err := sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets: got %v, want Forbidden", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
	if _, err := sa.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create configmap with a read-only Role: got %v, want Forbidden", err)
	}
	other := cp.Namespace(t)
	if _, err := sa.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list configmaps in another namespace: got %v, want Forbidden", err)
	}
}

func TestKubeconfigFiles(t *testing.T) {
	cp := Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)

	for _, tc := range []struct {
		name string
		path func() (string, error)
		want string
	}{
		{"admin", func() (string, error) { return cp.Kubeconfig, nil }, "admin"},
		{"service account", func() (string, error) { return cp.ServiceAccountKubeconfig(ctx, ns, "reader") }, "system:serviceaccount:" + ns + ":reader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, err := tc.path()
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatalf("load kubeconfig %s: %v", path, err)
			}
			review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("who am I with %s: %v", path, err)
			}
			if got := review.Status.UserInfo.Username; got != tc.want {
				t.Errorf("kubeconfig %s authenticates as %q, want %q", filepath.Base(path), got, tc.want)
			}
		})
	}
}

// TestNoProcessesLeftBehind runs a test binary that starts a control plane
// and then panics, or is interrupted, and checks that its etcd and
// kube-apiserver are gone afterwards.
func TestNoProcessesLeftBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two more control planes; skipped with -short")
	}
	for _, mode := range []string{"panic", "sigint", "sigkill"} {
		t.Run(mode, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pids")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "TESTENV_HELPER="+mode, "TESTENV_PIDFILE="+pidFile)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pids := waitForPIDs(t, pidFile, cmd)
			switch mode {
			case "sigint":
				cmd.Process.Signal(os.Interrupt)
			case "sigkill":
				cmd.Process.Kill()
			}
			err := cmd.Wait()
			if err == nil {
				t.Fatalf("helper in mode %s exited 0; output:\n%s", mode, out.String())
			}
			for _, pid := range pids {
				if !waitGone(pid, 15*time.Second) {
					t.Errorf("process %d (%s) still runs after the test binary ended by %s", pid, cmdline(pid), mode)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// helperProcess is the body of the child test binary of TestNoProcessesLeftBehind.
func helperProcess(mode string) {
	shared.main = true
	cp, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	shared.cp = cp
	pids := fmt.Sprintf("%d %d\n", cp.etcd.cmd.Process.Pid, cp.apiserver.cmd.Process.Pid)
	if err := os.WriteFile(os.Getenv("TESTENV_PIDFILE"), []byte(pids), 0o600); err != nil {
		panic(err)
	}
	switch mode {
	case "panic":
		panic("helper panics with a running control plane")
	case "sigint":
		// Main's signal handler stops the control plane and exits.
		stopOnSignal()
		select {}
	case "sigkill":
		select {}
	}
}

func waitForPIDs(t *testing.T, pidFile string, cmd *exec.Cmd) []int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(data), "\n") {
			var pids []int
			for _, f := range strings.Fields(string(data)) {
				pid, _ := strconv.Atoi(f)
				pids = append(pids, pid)
			}
			return pids
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Kill()
	t.Fatal("helper did not start a control plane within 2 minutes")
	return nil
}

// waitGone reports whether pid has exited (or is a zombie) within d.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(fields) > 0 && fields[0] == "Z" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// TestAuditEvents: the requests of a ServiceAccount, and only its own, are
// in the audit log with verb, resource and answer.
func TestAuditEvents(t *testing.T) {
	cp := Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "auditee")
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(cfg)
	if _, err := sa.CoreV1().ConfigMaps(ns).Get(ctx, "secret-stuff", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("get a ConfigMap without rights: %v, want Forbidden", err)
	}
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	events, err := cp.AuditEvents(ns, "auditee")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, e := range events {
		if e.ObjectRef != nil && e.Verb == "get" && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == "secret-stuff" &&
			e.ObjectRef.Namespace == ns && e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			found = true
		}
		if e.Verb == "list" && e.ObjectRef != nil && e.ObjectRef.Resource == "configmaps" {
			t.Errorf("the admin's list is among the ServiceAccount's events: %+v", e)
		}
	}
	if !found {
		t.Errorf("no audit event of the forbidden get among %d events: %+v", len(events), events)
	}
}

// TestAPIServerRestart stops and kills kube-apiserver of a control plane of
// its own and starts it again: meanwhile requests fail; afterwards the same
// clients and kubeconfig work on the same port and the objects are kept.
func TestAPIServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts another control plane; skipped with -short")
	}
	ctx := context.Background()
	cp, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept"}, Data: map[string]string{"k": "v"}}
	if _, err := cp.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := cp.Config.Host
	for _, stop := range []struct {
		name string
		f    func()
	}{{"StopAPIServer", cp.StopAPIServer}, {"KillAPIServer", cp.KillAPIServer}} {
		stop.f()
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := cp.Client.CoreV1().ConfigMaps("default").Get(short, "kept", metav1.GetOptions{})
		cancel()
		if err == nil {
			t.Fatalf("after %s the API server still answers", stop.name)
		}
		if err := cp.StartAPIServer(ctx); err != nil {
			t.Fatalf("start again after %s: %v", stop.name, err)
		}
		if cp.Config.Host != host {
			t.Errorf("after %s the API server moved from %s to %s", stop.name, host, cp.Config.Host)
		}
		got, err := cp.Client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
		if err != nil || got.Data["k"] != "v" {
			t.Fatalf("after %s and a start: %v %v, want the ConfigMap kept", stop.name, got, err)
		}
	}
	kc, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("the kubeconfig after the restarts: %v", err)
	}
	if err := cp.StartAPIServer(ctx); err == nil {
		t.Error("StartAPIServer on a running API server succeeded, want an error")
	}
}

// TestExperimentalChannel starts a control plane with the experimental
// channel's CRDs: its HTTPRoute CRD says so, and a rule's retry survives a
// round trip, which the shared standard channel control plane prunes.
func TestExperimentalChannel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts another control plane; skipped with -short")
	}
	ctx := context.Background()
	codes := []gatewayv1.HTTPRouteRetryStatusCode{503}
	route := func(ns string) *gatewayv1.HTTPRoute {
		return &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "retrying"},
			Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{{
				Retry: &gatewayv1.HTTPRouteRetry{Codes: codes},
			}}},
		}
	}
	for _, tc := range []struct {
		name      string
		cp        func(t testing.TB) *ControlPlane
		channel   string
		keepRetry bool
	}{
		{"standard", Get, "standard", false},
		{"experimental", func(t testing.TB) *ControlPlane {
			cp, err := Start(ctx, Options{ExperimentalChannel: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := cp.Stop(); err != nil {
					t.Errorf("stop the control plane: %v", err)
				}
			})
			return cp
		}, "experimental", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := tc.cp(t)
			crd, err := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "httproutes.gateway.networking.k8s.io", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := crd.Annotations["gateway.networking.k8s.io/channel"]; got != tc.channel {
				t.Errorf("HTTPRoute CRD channel = %q, want %q", got, tc.channel)
			}
			ns := cp.Namespace(t)
			got, err := cp.Gateway.GatewayV1().HTTPRoutes(ns).Create(ctx, route(ns), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if kept := got.Spec.Rules[0].Retry != nil; kept != tc.keepRetry {
				t.Errorf("rule retry kept = %v, want %v", kept, tc.keepRetry)
			}
		})
	}
}
