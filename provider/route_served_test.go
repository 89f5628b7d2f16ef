package provider

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// fakePod plays one Ready gateway pod for the provider's served wait: a
// Pod object whose Ready condition the test sets (there is no kubelet
// here), and the pod's GatewayPodReport, written as the chaperone writes
// it after each routing load: up to the RoutingFragment resource version
// it has seen, after delay, rejecting the fragments reject names, or
// nothing at all when silent.
type fakePod struct {
	t    *testing.T
	dyn  dynamic.Interface
	gw   object.Ref
	name string

	mu       sync.Mutex
	delay    time.Duration
	silent   bool
	reject   map[string]string // fragment name → reason
	reported time.Time         // when the last report was written
}

func startFakePod(t *testing.T, cp *testenv.ControlPlane, gw object.Ref) *fakePod {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := &fakePod{t: t, dyn: dynamic.NewForConfigOrDie(cp.Config), gw: gw, name: gw.Name + "-pod-1", reject: map[string]string{}}
	// No controller-manager here creates the namespace's default
	// ServiceAccount, which admission wants for a pod.
	if _, err := cp.Client.CoreV1().ServiceAccounts(gw.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: gw.Namespace, Labels: gwruntime.Labels(gw)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "chaperone", Image: "example.invalid/none:1"}}},
	}
	created, err := cp.Client.CoreV1().Pods(gw.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cp.Client.CoreV1().Pods(gw.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := vgwapi.EnsureCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(p.dyn, 0, gw.Namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = labels.SelectorFromSet(gwruntime.GatewayLabels(gw)).String()
	})
	inf := f.ForResource(vgwapi.RoutingFragments).Informer()
	changed := make(chan struct{}, 1)
	kick := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { kick() }, UpdateFunc: func(any, any) { kick() }, DeleteFunc: func(any) { kick() },
	})
	f.Start(ctx.Done())
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			p.mu.Lock()
			delay, silent, reject := p.delay, p.silent, p.reject
			p.mu.Unlock()
			time.Sleep(delay)
			if silent {
				continue
			}
			rv := inf.GetStore().LastStoreSyncResourceVersion()
			var rejected []vgwapi.Rejection
			n := 0
			for _, o := range inf.GetStore().List() {
				u := o.(*unstructured.Unstructured)
				if reason, ok := reject[u.GetName()]; ok {
					rejected = append(rejected, vgwapi.Rejection{Name: u.GetName(), ResourceVersion: u.GetResourceVersion(), Reason: reason})
					continue
				}
				n++
			}
			report, err := vgwapi.NewReport(gw, vgwapi.Pod{Name: p.name}, vgwapi.ReportStatus{Routing: &vgwapi.RoutingReport{
				FragmentsResourceVersion: rv, GatewayGeneration: 1, Fragments: n, Rejected: rejected, Time: metav1.Now(),
			}})
			if err == nil {
				err = vgwapi.ApplyReport(ctx, p.dyn, report)
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("fake pod report: %v", err)
			}
			p.mu.Lock()
			p.reported = time.Now()
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *fakePod) set(delay time.Duration, silent bool, reject map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay, p.silent, p.reject = delay, silent, reject
}

func (p *fakePod) lastReport() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reported
}

// TestAccRouteServed: apply means served. With a Ready gateway pod, create,
// update and destroy return only once the pod reports serving the write;
// a pod's rejection fails the apply with its reason and sets Accepted to
// False; a pod that never reports fails the apply at served_timeout,
// naming it; wait_for_served = false does not wait.
func TestAccRouteServed(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	gwRef := object.Ref{Namespace: ns, Name: gw}
	pod := startFakePod(t, cp, gwRef)
	fragName := gwruntime.FragmentName(gwRef, object.Ref{Namespace: ns, Name: "web"})
	const addr = "varnishgw_http_route.web"
	config := func(path, extra string) string {
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "web" {
  namespace = %q
  name      = "web"
  parent_ref {
    name = %q
  }
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = %q
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
  }
  %s
}
`, ns, gw, path, extra)
	}
	// servedBeforeReturn checks that the pod's report for the stored
	// fragment was written before the apply returned, and covers it.
	var applied time.Time
	servedBeforeReturn := func(*terraform.State) error {
		obj, _, err := fragment(cp, ns, gw, "web")
		if err != nil {
			return err
		}
		reports, err := vgwapi.ReadReports(context.Background(), dynamic.NewForConfigOrDie(cp.Config), gwRef)
		if err != nil {
			return err
		}
		r := reports[pod.name]
		if r == nil || r.Status.Routing == nil {
			return fmt.Errorf("no report of %s", pod.name)
		}
		if c, err := resourceversion.CompareResourceVersion(r.Status.Routing.FragmentsResourceVersion, obj.GetResourceVersion()); err != nil || c < 0 {
			return fmt.Errorf("the pod reports %s, before the fragment's %s (%v)", r.Status.Routing.FragmentsResourceVersion, obj.GetResourceVersion(), err)
		}
		if rep := pod.lastReport(); rep.IsZero() || rep.After(applied) {
			return fmt.Errorf("the apply returned (checked at %s) before the pod reported (%s)", applied.Format(time.StampMilli), rep.Format(time.StampMilli))
		}
		return nil
	}
	now := func(*terraform.State) error { applied = time.Now(); return nil }
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				PreConfig: func() { pod.set(1500*time.Millisecond, false, nil) },
				Config:    config("/a", ""),
				Check:     resource.ComposeTestCheckFunc(now, servedBeforeReturn),
			},
			{
				PreConfig: func() { pod.set(1500*time.Millisecond, false, nil) },
				Config:    config("/b", ""),
				Check:     resource.ComposeTestCheckFunc(now, servedBeforeReturn),
			},
			{
				// The pod rejects the new version: the apply fails with its
				// reason; the route's status says so.
				PreConfig: func() {
					pod.set(0, false, map[string]string{fragName: "unmarshal fragment: version is 2, this build reads version 1"})
				},
				Config:      config("/c", ""),
				ExpectError: regexp.MustCompile(`(?s)gateway pod ` + ns + `/` + gw + `-pod-1 rejected the routing fragment.*version is 2, this build.*reads version 1`),
			},
			{
				PreConfig: func() {
					if err := checkRouteCondition(cp, ns, "web", gw, "Accepted", metav1.ConditionFalse, "UnsupportedValue")(nil); err != nil {
						t.Error(err)
					}
					pod.set(0, true, nil)
				},
				// A pod that never reports: the apply fails at served_timeout.
				Config:      config("/d", `served_timeout = "3s"`),
				ExpectError: regexp.MustCompile(`(?s)did not report serving the new routing within 3s.*` + gw + `-pod-1.*wait_for_served`),
			},
			{
				// Not waiting.
				Config: config("/e", "wait_for_served = false"),
				Check:  resource.TestCheckResourceAttr(addr, "wait_for_served", "false"),
			},
			{
				// Back to a pod that serves: apply and, at the end, destroy
				// wait for it.
				PreConfig: func() { pod.set(0, false, nil) },
				Config:    config("/f", ""),
				Check: resource.ComposeTestCheckFunc(
					checkRouteCondition(cp, ns, "web", gw, "Accepted", metav1.ConditionTrue, "Accepted"),
					now, servedBeforeReturn,
				),
			},
		},
	})
}
