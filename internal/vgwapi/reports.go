package vgwapi

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
)

// ReportFieldManager is the server-side apply field manager of a pod's
// writes of its GatewayPodReport.
const ReportFieldManager = status.ChaperoneManager

// Pod identifies the pod a report is about. UID, when set, makes the Pod
// the report's owner, so Kubernetes deletes the report with the pod (the
// chaperone learns it from the downward API; outside a pod it is empty).
type Pod struct {
	Name, UID string
}

// NewReport is the GatewayPodReport of pod for gw, for server-side apply.
func NewReport(gw object.Ref, pod Pod, status ReportStatus) (*unstructured.Unstructured, error) {
	r := GatewayPodReport{
		TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: GatewayPodReportKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: gw.Namespace, Labels: gwruntime.GatewayLabels(gw),
		},
		Spec:   ReportSpec{Gateway: gw.Name, Pod: pod.Name},
		Status: status,
	}
	if pod.UID != "" {
		r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: types.UID(pod.UID)}}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
	if err != nil {
		return nil, fmt.Errorf("encode the GatewayPodReport %s/%s: %w", gw.Namespace, pod.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// ApplyReport writes the report with server-side apply, as its only writer.
func ApplyReport(ctx context.Context, dyn dynamic.Interface, report *unstructured.Unstructured) error {
	_, err := dyn.Resource(GatewayPodReports).Namespace(report.GetNamespace()).Apply(ctx, report.GetName(), report,
		metav1.ApplyOptions{FieldManager: ReportFieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("write the GatewayPodReport %s/%s: %w", report.GetNamespace(), report.GetName(), err)
	}
	return nil
}

// ReadReports reads the GatewayPodReports of gw, by pod name.
func ReadReports(ctx context.Context, dyn dynamic.Interface, gw object.Ref) (map[string]*GatewayPodReport, error) {
	list, err := dyn.Resource(GatewayPodReports).Namespace(gw.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.GatewayLabels(gw)).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the GatewayPodReports of Gateway %s: %w", gw, err)
	}
	out := map[string]*GatewayPodReport{}
	for i := range list.Items {
		var r GatewayPodReport
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &r); err != nil {
			return nil, fmt.Errorf("decode the GatewayPodReport %s/%s: %w", gw.Namespace, list.Items[i].GetName(), err)
		}
		if r.Spec.Gateway != gw.Name {
			continue
		}
		out[r.Spec.Pod] = &r
	}
	return out, nil
}

// Served reports whether r's routing includes the RoutingFragment write
// of resource version rv (a write of the fragment name, or its deletion
// when name's write was a delete). When the pod rejected that version of
// the fragment, it returns the rejection. An r without routing, or with a
// malformed resource version, has not served it.
func (r *GatewayPodReport) Served(name, rv string) (bool, *Rejection) {
	if r == nil || r.Status.Routing == nil {
		return false, nil
	}
	cmp, err := resourceversion.CompareResourceVersion(r.Status.Routing.FragmentsResourceVersion, rv)
	if err != nil || cmp < 0 {
		return false, nil
	}
	for i, rej := range r.Status.Routing.Rejected {
		if rej.Name == name && rej.ResourceVersion == rv {
			return true, &r.Status.Routing.Rejected[i]
		}
	}
	return true, nil
}

// Reporter writes one pod's GatewayPodReport. Set never blocks; Run writes
// the latest status, skips writes that would change nothing and retries
// failures with backoff.
type Reporter struct {
	dyn dynamic.Interface
	gw  object.Ref
	pod Pod
	log *slog.Logger

	mu      sync.Mutex
	want    *ReportStatus
	written *ReportStatus
	kick    chan struct{}
}

// NewReporter returns the Reporter of pod for gw.
func NewReporter(dyn dynamic.Interface, gw object.Ref, pod Pod, log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.Default()
	}
	return &Reporter{dyn: dyn, gw: gw, pod: pod, log: log, kick: make(chan struct{}, 1)}
}

// SetRouting records the routing the pod serves now.
func (rp *Reporter) SetRouting(r RoutingReport) {
	rp.mu.Lock()
	st := ReportStatus{}
	if rp.want != nil {
		st = *rp.want
	}
	st.Routing = &r
	rp.want = &st
	rp.mu.Unlock()
	select {
	case rp.kick <- struct{}{}:
	default:
	}
}

// Run writes the report until ctx ends.
func (rp *Reporter) Run(ctx context.Context) {
	backoff := 250 * time.Millisecond
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-rp.kick:
		case <-retry:
		}
		retry = nil
		rp.mu.Lock()
		want, written := rp.want, rp.written
		rp.mu.Unlock()
		if want == nil || sameReport(want, written) {
			continue
		}
		obj, err := NewReport(rp.gw, rp.pod, *want)
		if err == nil {
			err = ApplyReport(ctx, rp.dyn, obj)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			level := slog.LevelError
			if apierrors.IsNotFound(err) { // the CRD is not installed (yet)
				level = slog.LevelWarn
			}
			rp.log.Log(ctx, level, "cannot write the pod's report", "error", err, "retry_in", backoff)
			retry = time.After(backoff)
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
		rp.mu.Lock()
		rp.written = want
		rp.mu.Unlock()
	}
}

// sameReport compares reports without the load time: a routing that did
// not change is not written again.
func sameReport(a, b *ReportStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	ar, br := a.Routing, b.Routing
	if ar == nil || br == nil {
		return ar == br
	}
	x, y := *ar, *br
	x.Time, y.Time = metav1.Time{}, metav1.Time{}
	return reflect.DeepEqual(x, y)
}
