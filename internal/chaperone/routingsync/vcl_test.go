package routingsync

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/chaperone/vclreload"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

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

func TestProgrammedCombinesVCLAndRouting(t *testing.T) {
	invalid := errors.New("fragment ConfigMap x: bad")
	unreachable := errors.New("reload ghost: HTTP 503")
	vclBad := errors.New(`key "main.vcl" of ConfigMap ns/varnishgw-gw-vcl does not compile`)
	waiting := errors.New("waiting for ConfigMap ns/varnishgw-gw-vcl")
	for _, tc := range []struct {
		name    string
		r       routingState
		v       *VCLStatus
		status  metav1.ConditionStatus
		reason  string
		message []string
		absent  string
	}{
		{"no VCL source, loaded", routingState{generation: 3, err: nil, pending: false}, nil, "True", "Programmed", []string{"ghost loaded"}, ""},
		{"no VCL source, invalid", routingState{generation: 3, err: invalid, pending: false}, nil, "False", "Invalid", []string{"fragment ConfigMap x"}, ""},
		{"VCL active, loaded", routingState{generation: 3, err: nil, pending: false}, &VCLStatus{Active: true}, "True", "Programmed", []string{"main VCL is active"}, ""},
		{"VCL active, routing invalid", routingState{generation: 3, err: invalid, pending: false}, &VCLStatus{Active: true}, "False", "Invalid", []string{"fragment ConfigMap x"}, ""},
		{"ConfigMap missing hides ghost's 503", routingState{generation: 3, err: unreachable, pending: true}, &VCLStatus{Err: waiting, Pending: true}, "False", "Pending", []string{"waiting for ConfigMap"}, "503"},
		{"first VCL does not compile", routingState{generation: 3, err: unreachable, pending: true}, &VCLStatus{Err: vclBad}, "False", "Invalid", []string{"does not compile"}, "503"},
		{"later VCL does not compile, routing fine", routingState{generation: 3, err: nil, pending: false}, &VCLStatus{Active: true, Err: vclBad}, "False", "Invalid", []string{"does not compile"}, "routing:"},
		{"fragments rejected", routingState{generation: 3, rejected: []vgwapi.Rejection{{Name: "vgw-x", ResourceVersion: "7"}}}, &VCLStatus{Active: true}, "True", "Programmed", []string{"main VCL is active", "1 routing fragment(s) rejected", "vgw-x", "kubectl get gatewaypodreports"}, ""},
		{"both broken", routingState{generation: 3, err: invalid, pending: false}, &VCLStatus{Active: true, Err: waiting, Pending: true}, "False", "Invalid", []string{"waiting for ConfigMap", "routing: fragment ConfigMap x"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := programmed(tc.r, tc.v)
			if p.Generation != 3 || p.Status != tc.status || string(p.Reason) != tc.reason {
				t.Errorf("= %+v, want generation 3, %s/%s", p, tc.status, tc.reason)
			}
			for _, m := range tc.message {
				if !strings.Contains(p.Message, m) {
					t.Errorf("message %q lacks %q", p.Message, m)
				}
			}
			if tc.absent != "" && strings.Contains(p.Message, tc.absent) {
				t.Errorf("message %q contains %q", p.Message, tc.absent)
			}
		})
	}
}

// vclLoads records the sources KubeVCL loads; sources containing "broken"
// fail like varnishd's compiler.
type vclLoads struct {
	mu       sync.Mutex
	loads    []string
	statuses []VCLStatus
}

func (l *vclLoads) load(_ context.Context, src string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loads = append(l.loads, src)
	if strings.Contains(src, "broken") {
		return &vclreload.CompileError{Name: "main-x", Message: "Message from VCC-compiler:\nUnknown token 'broken'\n\n('<vcl.inline>' Line 1 Pos 10)\n1\n2\n3\n4\n5\n6\n7"}
	}
	return nil
}

func (l *vclLoads) report(st VCLStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses = append(l.statuses, st)
}

func (l *vclLoads) last(t *testing.T, what string, ok func(loads []string, st VCLStatus) bool) VCLStatus {
	t.Helper()
	var got VCLStatus
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

// TestKubeVCLFollowsTheConfigMap runs KubeVCL as the chaperone's
// ServiceAccount (configmaps get/list/watch only) against the test API
// server; the load function stands in for varnishd (the chaperone's
// binary test covers the real one).
func TestKubeVCLFollowsTheConfigMap(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(routing.ObjectRef{Namespace: ns, Name: "gw"}))
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	v := &KubeVCL{Client: kubernetes.NewForConfigOrDie(cfg), Namespace: ns, Name: "gw", Logger: testLogger(t)}
	var l vclLoads
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- v.Run(rctx, l.load, l.report) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	cmName := gwruntime.VCLConfigMapName(routing.ObjectRef{Namespace: ns, Name: "gw"})
	if v.ConfigMapName() != ns+"/"+cmName {
		t.Errorf("ConfigMapName() = %q", v.ConfigMapName())
	}

	// Missing: Pending, naming the awaited ConfigMap and key.
	st := l.last(t, "pending while the ConfigMap is missing", func(_ []string, st VCLStatus) bool { return st.Err != nil })
	if !st.Pending || st.Active || !strings.Contains(st.Err.Error(), cmName) || !strings.Contains(st.Err.Error(), `"main.vcl"`) {
		t.Errorf("missing ConfigMap: %+v (%v)", st, st.Err)
	}

	// Created: loaded, active.
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName},
		Data:       map[string]string{gwruntime.VCLDataKey: "vcl 4.1; # v1"},
	}
	if cm, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.last(t, "v1 active", func(loads []string, st VCLStatus) bool {
		return st.Err == nil && st.Active && len(loads) == 1 && loads[0] == "vcl 4.1; # v1"
	})

	// A label change does not load again.
	cm.Labels = map[string]string{"x": "y"}
	if cm, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Broken: Invalid with the compiler's first lines, still Active.
	cm.Data[gwruntime.VCLDataKey] = "vcl 4.1; broken"
	if cm, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st = l.last(t, "compile error reported", func(_ []string, st VCLStatus) bool { return st.Err != nil })
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
	st = l.last(t, "missing key reported", func(_ []string, st VCLStatus) bool {
		return st.Err != nil && strings.Contains(st.Err.Error(), "no \"main.vcl\" key")
	})
	if st.Pending {
		t.Errorf("missing key is Pending, want Invalid")
	}

	// Fixed, then deleted: Pending, the loaded VCL stays (Active).
	cm.Data = map[string]string{gwruntime.VCLDataKey: "vcl 4.1; # v2"}
	if _, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.last(t, "v2 active", func(loads []string, st VCLStatus) bool {
		return st.Err == nil && loads[len(loads)-1] == "vcl 4.1; # v2"
	})
	if err := cp.Client.CoreV1().ConfigMaps(ns).Delete(ctx, cmName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	st = l.last(t, "deletion reported", func(_ []string, st VCLStatus) bool { return st.Err != nil })
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
