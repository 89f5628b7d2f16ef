package control

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// roleWrites counts the requests that write Roles.
type roleWrites struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (w roleWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/roles") {
		w.n.Add(1)
	}
	return w.next.RoundTrip(req)
}

// TestRouteStatusRoleGroupCommit: two processes (two Clusters) add 40
// routes each, all at once, to one Gateway's route status Role in one
// namespace, half of them with backends there: the Role lists all 80 (no
// change of either process is lost to the other's) and lets the pods read
// the backends, bound to the Gateway's ServiceAccount, in fewer writes
// than routes; once no listed route has backends there, the backend rules
// go; removing all routes deletes the Role and its binding. A Role of that
// name that varnishgw did not write is refused, not taken over.
func TestRouteStatusRoleGroupCommit(t *testing.T) {
	cp := testenv.Get(t)
	ctx := t.Context()
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	var writes atomic.Int64
	cluster := func() *Cluster {
		cfg := rest.CopyConfig(cp.Config)
		cfg.QPS, cfg.Burst = 1000, 1000
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return roleWrites{rt, &writes} })
		return &Cluster{Kube: kubernetes.NewForConfigOrDie(cfg)}
	}
	clusters := []*Cluster{cluster(), cluster()}
	const n = 40
	change := func(add, local bool) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(clusters)*n)
		for ci, c := range clusters {
			for i := range n {
				wg.Go(func() {
					errs <- c.changeRouteStatusRole(ctx, gw, ns, fmt.Sprintf("p%d-r%02d", ci, i), add, local && i%2 == 0)
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	change(true, true)
	name := gwruntime.RouteStatusRoleName(gw)
	role, err := cp.Client.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for ci := range clusters {
		for i := range n {
			want = append(want, fmt.Sprintf("p%d-r%02d", ci, i))
		}
	}
	got, local := routeStatusRoleRoutes(role)
	if !slices.Equal(got, want) {
		t.Errorf("the Role lists %d routes %v, want the %d added", len(got), got, len(want))
	}
	if len(local) != len(want)/2 {
		t.Errorf("the Role lists %d routes with backends there %v, want %d", len(local), local, len(want)/2)
	}
	wantRules := append(gwruntime.RouteStatusRules(want), gwruntime.BackendRules()...)
	if !equality.Semantic.DeepEqual(role.Rules, wantRules) {
		t.Errorf("Role rules %+v, want %+v", role.Rules, wantRules)
	}
	rb, err := cp.Client.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.RoleRef.Name != name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != gwruntime.Name(gw) || rb.Subjects[0].Namespace != ns {
		t.Errorf("RoleBinding %+v %+v, want the Role bound to the Gateway's ServiceAccount", rb.RoleRef, rb.Subjects)
	}
	t.Logf("%d routes added by 2 processes in %d Role writes", len(want), writes.Load())
	if w := writes.Load(); w >= int64(len(want)) {
		t.Errorf("%d Role writes for %d routes: the changes were not written together", w, len(want))
	}

	// Adding a route again writes nothing.
	before := writes.Load()
	if err := clusters[0].changeRouteStatusRole(ctx, gw, ns, "p0-r00", true, true); err != nil {
		t.Fatal(err)
	}
	if w := writes.Load() - before; w != 0 {
		t.Errorf("adding a listed route again made %d Role writes, want 0", w)
	}

	// No route with backends there any more: the backend rules go.
	change(true, false)
	role, err = cp.Client.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(role.Rules, gwruntime.RouteStatusRules(want)) || role.Annotations[localBackendsAnnotation] != "" {
		t.Errorf("Role rules %+v and annotations %v, want the route rules only", role.Rules, role.Annotations)
	}

	change(false, false)
	if _, err := cp.Client.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Role after its last route was removed: %v, want NotFound", err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the RoleBinding after the last route was removed: %v, want NotFound", err)
	}

	// Someone else's Role of that name.
	theirs := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = cluster().changeRouteStatusRole(ctx, gw, ns, "web", true, false)
	if err == nil || !strings.Contains(err.Error(), "not written by varnishgw") || !strings.Contains(err.Error(), "delete or rename it") {
		t.Errorf("adding a route to a Role varnishgw did not write: %v, want an error saying so and what to do", err)
	}
}
