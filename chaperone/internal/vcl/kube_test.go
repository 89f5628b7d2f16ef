package vcl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestFirstLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a\n\nb\r\n", 3, "a\nb"},
		{"a\nb\nc", 3, "a\nb\nc"},
		{"a\nb\nc\nd", 3, "a\nb\nc\n..."},
	} {
		if got := firstLines(tc.in, tc.n); got != tc.want {
			t.Errorf("firstLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// vclLoads records the sources KubeSource loads; sources containing "broken"
// fail like varnishd's compiler.
type vclLoads struct {
	mu       sync.Mutex
	loads    []string
	statuses []Status
}

func (l *vclLoads) load(_ context.Context, src string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loads = append(l.loads, src)
	if strings.Contains(src, "broken") {
		return &CompileError{Name: "main-x", Message: "Message from VCC-compiler:\nUnknown token 'broken'\n\n('<vcl.inline>' Line 1 Pos 10)\n1\n2\n3\n4\n5\n6\n7"}
	}
	return nil
}

func (l *vclLoads) report(st Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses = append(l.statuses, st)
}

func (l *vclLoads) last(t *testing.T, what string, ok func(loads []string, st Status) bool) Status {
	t.Helper()
	var got Status
	eventually(t, 30*time.Second, what, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.statuses) == 0 {
			return errNotYet
		}
		got = l.statuses[len(l.statuses)-1]
		if !ok(l.loads, got) {
			return errors.New("last status " + strings.ReplaceAll(errString(got.Err), "\n", " | "))
		}
		return nil
	})
	return got
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// recordDigest writes the digest of src on the Gateway gw as the provider
// does (gwruntime.VCLDigestAnnotation), creating the Gateway if needed.
func recordDigest(t *testing.T, cp *testenv.ControlPlane, ns, src string) {
	t.Helper()
	ctx := context.Background()
	gw, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		gw = &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw",
				Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}},
		}
		if gw, err = cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if gw.Annotations == nil {
		gw.Annotations = map[string]string{}
	}
	gw.Annotations[gwruntime.VCLDigestAnnotation] = gwruntime.VCLDigest(src)
	if _, err := cp.Gateway.GatewayV1().Gateways(ns).Update(ctx, gw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runKubeSource runs a KubeSource for the Gateway ns/gw as the chaperone's
// ServiceAccount (the Gateway Role: its VCL ConfigMap and its Gateway,
// get/list/watch) until the test ends.
func runKubeSource(t *testing.T, cp *testenv.ControlPlane, ns string) (*KubeSource, *vclLoads) {
	t.Helper()
	ctx := context.Background()
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "gw"}))
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	v := &KubeSource{Client: kubernetes.NewForConfigOrDie(cfg), Gateway: gatewayclient.NewForConfigOrDie(cfg),
		Namespace: ns, Name: "gw", Logger: testLogger(t)}
	l := &vclLoads{}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- v.Run(rctx, l.load, l.report) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return v, l
}

// TestKubeVCLFollowsTheConfigMap runs KubeSource as the chaperone's
// ServiceAccount against the test API server, the provider's part played
// by the test (the ConfigMap, and the digest on the Gateway before it);
// the load function stands in for varnishd (the chaperone's binary test
// covers the real one).
func TestKubeSourceFollowsTheConfigMap(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	v, l := runKubeSource(t, cp, ns)
	var err error
	cmName := gwruntime.VCLConfigMapName(object.Ref{Namespace: ns, Name: "gw"})
	if v.ConfigMapName() != ns+"/"+cmName {
		t.Errorf("ConfigMapName() = %q", v.ConfigMapName())
	}

	// Missing: Pending, naming the awaited ConfigMap and key.
	st := l.last(t, "pending while the ConfigMap is missing", func(_ []string, st Status) bool { return st.Err != nil })
	if !st.Pending || st.Active || !strings.Contains(st.Err.Error(), cmName) || !strings.Contains(st.Err.Error(), `"main.vcl"`) {
		t.Errorf("missing ConfigMap: %+v (%v)", st, st.Err)
	}

	// Created: loaded, active.
	recordDigest(t, cp, ns, "vcl 4.1; # v1")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName},
		Data:       map[string]string{gwruntime.VCLDataKey: "vcl 4.1; # v1"},
	}
	if cm, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.last(t, "v1 active", func(loads []string, st Status) bool {
		return st.Err == nil && st.Active && len(loads) == 1 && loads[0] == "vcl 4.1; # v1"
	})

	// A label change does not load again.
	cm.Labels = map[string]string{"x": "y"}
	if cm, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Broken: Invalid with the compiler's first lines, still Active.
	recordDigest(t, cp, ns, "vcl 4.1; broken")
	cm.Data[gwruntime.VCLDataKey] = "vcl 4.1; broken"
	if cm, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The ConfigMap's and the Gateway's events come through two informers
	// in either order: the digest may be refused for a moment first.
	st = l.last(t, "compile error reported", func(_ []string, st Status) bool {
		return st.Err != nil && strings.Contains(st.Err.Error(), "does not compile")
	})
	msg := st.Err.Error()
	if st.Pending || !st.Active || !strings.Contains(msg, cmName) || !strings.Contains(msg, "Unknown token 'broken'") ||
		strings.Contains(msg, "\n7") || !strings.HasSuffix(msg, "...") {
		t.Errorf("broken VCL: %+v: %s", st, msg)
	}
	l.mu.Lock()
	if len(l.loads) != 2 {
		t.Errorf("loads = %q, want v1 and the broken one (a label change loads nothing)", l.loads)
	}
	l.mu.Unlock()

	// Missing key: Invalid.
	cm.Data = map[string]string{"other": "x"}
	if cm, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st = l.last(t, "missing key reported", func(_ []string, st Status) bool {
		return st.Err != nil && strings.Contains(st.Err.Error(), "no \"main.vcl\" key")
	})
	if st.Pending {
		t.Errorf("missing key is Pending, want Invalid")
	}

	// Fixed, then deleted: Pending, the loaded VCL stays (Active).
	recordDigest(t, cp, ns, "vcl 4.1; # v2")
	cm.Data = map[string]string{gwruntime.VCLDataKey: "vcl 4.1; # v2"}
	if _, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.last(t, "v2 active", func(loads []string, st Status) bool {
		return st.Err == nil && loads[len(loads)-1] == "vcl 4.1; # v2"
	})
	if err := cp.Client.CoreV1().ConfigMaps(ns).Delete(ctx, cmName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	st = l.last(t, "deletion reported", func(_ []string, st Status) bool { return st.Err != nil })
	if !st.Pending || !st.Active || !strings.Contains(st.Err.Error(), "deleted") {
		t.Errorf("deleted: %+v (%v)", st, st.Err)
	}

	// Reload (after varnishd lost its VCLs) loads the last good source.
	if err := v.Reload(ctx, l.load); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	if got := l.loads[len(l.loads)-1]; got != "vcl 4.1; # v2" {
		t.Errorf("Reload loaded %q, want v2", got)
	}
	l.mu.Unlock()
}

func eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

var errNotYet = fmt.Errorf("not yet")

// TestKubeSourceRefusesAnotherVCL: a namespace editor (the rules of the
// ClusterRole edit bound in the Gateway's namespace, with its real token) can update the VCL
// ConfigMap but not the Gateway's digest annotation; the main.vcl it writes
// is not loaded, the status says why with both digests, and the running VCL
// stays. The provider's next apply (the recorded VCL back) is loaded again.
func TestKubeSourceRefusesAnotherVCL(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	_, l := runKubeSource(t, cp, ns)
	const good, evil = "vcl 4.1; # rendered by the provider", "vcl 4.1; # std.fileread(\"/var/run/secrets/...\")"
	recordDigest(t, cp, ns, good)
	cmName := gwruntime.VCLConfigMapName(object.Ref{Namespace: ns, Name: "gw"})
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName},
		Data:       map[string]string{gwruntime.VCLDataKey: good},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.last(t, "the provider's VCL active", func(loads []string, st Status) bool {
		return st.Err == nil && st.Active && len(loads) == 1 && loads[0] == good
	})

	// edit is aggregated from these two by kube-controller-manager, which
	// the test control plane does not run: bind what edit is made of.
	for _, role := range []string{"system:aggregate-to-edit", "system:aggregate-to-view"} {
		if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "editor-" + strings.TrimPrefix(role, "system:")},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "editor"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ecfg, err := cp.ServiceAccountConfig(ctx, ns, "editor")
	if err != nil {
		t.Fatal(err)
	}
	editor, editorGW := kubernetes.NewForConfigOrDie(ecfg), gatewayclient.NewForConfigOrDie(ecfg)
	var cm *corev1.ConfigMap
	eventually(t, 30*time.Second, "the editor updates the VCL ConfigMap", func() error {
		cm, err = editor.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
		if err != nil {
			return err // RBAC may take a moment
		}
		cm.Data[gwruntime.VCLDataKey] = evil
		cm, err = editor.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	// The digest is where the editor cannot write it.
	gw, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gw.Annotations[gwruntime.VCLDigestAnnotation] = gwruntime.VCLDigest(evil)
	if _, err := editorGW.GatewayV1().Gateways(ns).Update(ctx, gw, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the editor's update of the Gateway's digest: %v, want Forbidden", err)
	}

	st := l.last(t, "the editor's VCL refused", func(_ []string, st Status) bool { return st.Err != nil })
	msg := st.Err.Error()
	for _, want := range []string{cmName, "was not loaded", "sha256 " + gwruntime.VCLDigest(evil), "sha256 " + gwruntime.VCLDigest(good),
		gwruntime.VCLDigestAnnotation, "the previous VCL keeps serving"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q lacks %q", msg, want)
		}
	}
	if !st.Active {
		t.Errorf("refused: Active = false, want the running VCL kept")
	}
	l.mu.Lock()
	if len(l.loads) != 1 {
		t.Errorf("loads = %q, want only the provider's VCL", l.loads)
	}
	l.mu.Unlock()

	// The next apply writes the rendered VCL back: loaded.
	cm.Data[gwruntime.VCLDataKey] = good
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.last(t, "the provider's VCL back", func(loads []string, st Status) bool {
		return st.Err == nil && len(loads) == 2 && loads[1] == good
	})
}
