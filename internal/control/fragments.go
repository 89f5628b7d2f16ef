package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// How the provider stores a route's routing: one RoutingFragment per
// (route, parent Gateway) in the Gateway's namespace (package vgwapi), and
// how it learns that the Gateway's pods serve it (their GatewayPodReports).

// FragmentWrite is one write of a RoutingFragment: the resource version
// that the gateway pods must reach to serve it.
type FragmentWrite struct {
	gw              object.Ref
	name            string
	resourceVersion string
	deleted         bool
}

// WriteFragments stores one RoutingFragment per parent Gateway and deletes
// the fragments of Gateways that are no longer parents (or no longer served
// by varnishgw); stale lists Gateways of the prior state. It returns the
// writes, for waitServed (forWait: see deleteFragment).
func (c *Cluster) WriteFragments(ctx context.Context, route *gatewayv1.HTTPRoute, frags []*routing.Fragment, stale []object.Ref, forWait bool) ([]FragmentWrite, error) {
	routeRef := object.Ref{Namespace: route.Namespace, Name: route.Name}
	if len(frags) > 0 {
		if err := c.EnsureAPI(ctx); err != nil {
			return nil, err
		}
	}
	var writes []FragmentWrite
	keep := map[object.Ref]bool{}
	for _, f := range frags {
		obj, err := routingfragment.New(f)
		if err != nil {
			return nil, err
		}
		lbl := obj.GetLabels()
		for k, v := range gwruntime.ManagedLabels() {
			lbl[k] = v
		}
		obj.SetLabels(lbl)
		got, err := c.Dynamic.Resource(vgwapi.RoutingFragments).Namespace(f.Gateway.Namespace).Apply(ctx, obj.GetName(), obj, ApplyOptions())
		if err != nil {
			return nil, fmt.Errorf("apply the RoutingFragment %s/%s for Gateway %s: %w", f.Gateway.Namespace, obj.GetName(), f.Gateway, err)
		}
		writes = append(writes, FragmentWrite{gw: f.Gateway, name: got.GetName(), resourceVersion: got.GetResourceVersion()})
		keep[f.Gateway] = true
	}
	for _, gw := range stale {
		if keep[gw] {
			continue
		}
		w, err := c.DeleteFragment(ctx, gw, routeRef, forWait)
		if err != nil {
			return nil, err
		}
		if w != nil {
			writes = append(writes, *w)
		}
	}
	return writes, nil
}

// DeleteFragment deletes the RoutingFragment of route for gw. It returns the deletion, or nil when
// there was nothing to delete. With forWait, the deletion's resource version
// is taken from a watch, for waitServed; without, it is empty.
func (c *Cluster) DeleteFragment(ctx context.Context, gw, route object.Ref, forWait bool) (*FragmentWrite, error) {
	name := gwruntime.FragmentName(gw, route)
	frags := c.Dynamic.Resource(vgwapi.RoutingFragments).Namespace(gw.Namespace)
	if !forWait {
		err := frags.Delete(ctx, name, metav1.DeleteOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil // also when the CRD is not installed: nothing to delete
		case err != nil:
			return nil, fmt.Errorf("delete the RoutingFragment %s/%s: %w", gw.Namespace, name, err)
		}
		return &FragmentWrite{gw: gw, name: name, deleted: true}, nil
	}
	// The API server answers the delete of a custom resource with a
	// Status, not with the deletion's resource version, which the pods'
	// caches reach: a watch sees the deletion. It starts from the version
	// of a list, the current one: the fragment's own version can be older
	// than the API server's watch window holds ("too old resource
	// version" when many routes are deleted at once).
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	list, err := frags.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if apierrors.IsNotFound(err) {
		return nil, nil // the CRD is not installed: nothing to delete
	}
	if err != nil {
		return nil, fmt.Errorf("get the RoutingFragment %s/%s: %w", gw.Namespace, name, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	cur := &list.Items[0]
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()}
	w, err := frags.Watch(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("watch the RoutingFragment %s/%s for its deletion: %w", gw.Namespace, name, err)
	}
	uid := cur.GetUID()
	err = frags.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		w.Stop()
		return nil, nil
	}
	if err != nil {
		w.Stop()
		return nil, fmt.Errorf("delete the RoutingFragment %s/%s: %w", gw.Namespace, name, err)
	}
	// The API server may end a watch before it sent the deletion (it does
	// under load): watch again from the same version, which its window
	// still holds, until the deletion is seen or the time is up.
	for {
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && u.GetUID() == uid {
					w.Stop()
					return &FragmentWrite{gw: gw, name: name, resourceVersion: u.GetResourceVersion(), deleted: true}, nil
				}
			case watch.Error:
				if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					w.Stop()
					return nil, fmt.Errorf("delete the RoutingFragment %s/%s: the API server no longer has the version to watch its deletion from: %w", gw.Namespace, name, err)
				}
			}
		}
		w.Stop()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("delete the RoutingFragment %s/%s: the deletion was not seen within 30s: %w", gw.Namespace, name, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
		if w, err = frags.Watch(ctx, opts); err != nil {
			return nil, fmt.Errorf("watch the RoutingFragment %s/%s for its deletion: %w", gw.Namespace, name, err)
		}
	}
}

// ReadFragments reads the stored fragments of route for the Gateways its
// ParentRefs name. A fragment that cannot be read is left out: the plan
// then shows the route's routing as a change, and the apply rewrites it.
func (c *Cluster) ReadFragments(ctx context.Context, route *gatewayv1.HTTPRoute) ([]*routing.Fragment, error) {
	routeRef := object.Ref{Namespace: route.Namespace, Name: route.Name}
	var out []*routing.Fragment
	for _, gw := range c.ParentRefs(ctx, route) {
		name := gwruntime.FragmentName(gw, routeRef)
		obj, err := c.Dynamic.Resource(vgwapi.RoutingFragments).Namespace(gw.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get the RoutingFragment %s/%s: %w", gw.Namespace, name, err)
		}
		if f, err := routingfragment.Read(gw, obj); err == nil {
			out = append(out, f)
		}
	}
	return out, nil
}

// GatewayFragments reads every RoutingFragment of gw with the reader the
// gateway pods use: the fragments they would accept and the ones they
// would reject.
func (c *Cluster) GatewayFragments(ctx context.Context, gw object.Ref) ([]*routing.Fragment, []vgwapi.Rejection, error) {
	list, err := c.Dynamic.Resource(vgwapi.RoutingFragments).Namespace(gw.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.GatewayLabels(gw)).String(),
	})
	if apierrors.IsNotFound(err) {
		return []*routing.Fragment{}, nil, nil // the CRD is not installed yet: no route was applied
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list the RoutingFragments of Gateway %s: %w", gw, err)
	}
	objs := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	frags, rejected := routingfragment.ReadAll(gw, objs)
	return frags, rejected, nil
}

// ServedPods are the pods whose GatewayPodReports a wait checks: the Ready
// pods of gw that are not terminating.
func (c *Cluster) ServedPods(ctx context.Context, gw object.Ref) ([]string, error) {
	list, err := c.Kube.CoreV1().Pods(gw.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.Labels(gw)).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the pods of Gateway %s: %w", gw, err)
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && podIsReady(&p) {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ServedError is a wait that ended because a pod rejected a fragment.
type ServedError struct {
	w   FragmentWrite
	pod string
	rej vgwapi.Rejection
}

func (e *ServedError) Error() string {
	kept := "the route is not served by that pod"
	if e.rej.Kept != "" {
		kept = "the pod keeps serving the route's previous routing (resource version " + e.rej.Kept + ")"
	}
	return fmt.Sprintf("gateway pod %s/%s rejected the routing fragment %s (resource version %s): %s; %s",
		e.w.gw.Namespace, e.pod, e.w.name, e.w.resourceVersion, e.rej.Reason, kept)
}

// WaitServed waits until every Ready pod of each written fragment's
// Gateway reports that it serves the write (vgwapi.GatewayPodReport.Served),
// within timeout. A Gateway without Ready pods has nothing to wait for. A
// pod's rejection ends the wait with a *ServedError.
func (c *Cluster) WaitServed(ctx context.Context, writes []FragmentWrite, timeout time.Duration) error {
	if len(writes) == 0 {
		return nil
	}
	start := time.Now()
	var rejected *ServedError
	left, err := pollPending(ctx, 200*time.Millisecond, timeout,
		func(ctx context.Context) ([]string, error) { return c.notServed(ctx, writes) },
		func(err error) bool { return errors.As(err, &rejected) })
	switch {
	case err == nil:
		return nil
	case rejected != nil:
		return err
	case ctx.Err() == nil && wait.Interrupted(err):
		return fmt.Errorf("the gateway pods did not report serving the new routing within %s: %s. Their chaperone logs "+
			"say why (kubectl logs -c chaperone); raise served_timeout, or set wait_for_served = false to skip the wait",
			time.Since(start).Round(time.Second), left)
	}
	return fmt.Errorf("wait for the gateway pods to serve the new routing: %w", err)
}

// notServed lists the Ready pods (with how far they are) that do not serve
// the writes yet; a pod's rejection of a write is a *ServedError.
func (c *Cluster) notServed(ctx context.Context, writes []FragmentWrite) ([]string, error) {
	var pending []string
	for _, gw := range writtenGateways(writes) {
		pods, err := c.ServedPods(ctx, gw)
		if err != nil {
			return nil, err
		}
		if len(pods) == 0 {
			continue
		}
		reports, err := vgwapi.ReadReports(ctx, c.Dynamic, gw)
		if err != nil {
			return nil, err
		}
		for _, pod := range pods {
			for _, w := range writes {
				if w.gw != gw {
					continue
				}
				served, rej := reports[pod].Served(w.name, w.resourceVersion)
				if rej != nil {
					return nil, &ServedError{w: w, pod: pod, rej: *rej}
				}
				if !served {
					pending = append(pending, fmt.Sprintf("%s/%s (%s)", gw.Namespace, pod, reportState(reports[pod])))
					break
				}
			}
		}
	}
	return pending, nil
}

func writtenGateways(writes []FragmentWrite) []object.Ref {
	seen := map[object.Ref]bool{}
	for _, w := range writes {
		seen[w.gw] = true
	}
	return sortedRefs(seen)
}

// reportState describes how far a pod's report is, for a timeout message.
func reportState(r *vgwapi.GatewayPodReport) string {
	switch {
	case r == nil:
		return "no GatewayPodReport yet: the chaperone has not started (kubectl logs -c chaperone says why), or the class's image is not this provider's release"
	case r.Status.Routing == nil:
		return "has not loaded routing yet"
	default:
		return "serves fragments up to resource version " + r.Status.Routing.FragmentsResourceVersion
	}
}

// RejectedByPod is frags with the parents of the rejected fragment's
// Gateway marked not accepted, with the pod's reason, for the route's
// status.
func RejectedByPod(frags []*routing.Fragment, e *ServedError) []*routing.Fragment {
	out := make([]*routing.Fragment, len(frags))
	for i, f := range frags {
		out[i] = f
		if f.Gateway != e.w.gw {
			continue
		}
		c := *f
		c.Parents = make([]routing.ParentStatus, len(f.Parents))
		for j, p := range f.Parents {
			p.Conditions = slices.Clone(p.Conditions)
			for k := range p.Conditions {
				if p.Conditions[k].Type == string(gatewayv1.RouteConditionAccepted) {
					p.Conditions[k] = routing.Condition{
						Type: string(gatewayv1.RouteConditionAccepted), Status: string(metav1.ConditionFalse),
						Reason: string(gatewayv1.RouteReasonUnsupportedValue), Message: e.Error(),
					}
				}
			}
			c.Parents[j] = p
		}
		out[i] = &c
	}
	return out
}

// pendingLeft is what a wait for pending items (pollPending) left when it
// ran out: the items of the last complete check, and the error of the
// last check if it failed.
type pendingLeft struct {
	pending []string
	last    error
}

func (p pendingLeft) String() string {
	s := strings.Join(p.pending, ", ")
	if p.last != nil {
		s += fmt.Sprintf(" (the last check failed: %v)", p.last)
	}
	return s
}

// pollPending calls check every interval, within timeout, until it
// reports nothing pending. A check that fails is tried again (the API may
// be briefly unavailable), and its error is reported as the last check's
// unless the timeout cut the check short; an error fatal accepts ends the
// wait with it. It returns what was left, and nil when nothing was, the
// fatal error, or the wait's own error (wait.Interrupted on timeout).
func pollPending(ctx context.Context, interval, timeout time.Duration, check func(context.Context) ([]string, error), fatal func(error) bool) (pendingLeft, error) {
	var left pendingLeft
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		pending, err := check(ctx)
		switch {
		case err != nil && fatal != nil && fatal(err):
			return false, err
		case err != nil && ctx.Err() != nil:
			return false, nil // cut short by the timeout: the last complete check stands
		case err != nil:
			left.last = err
			return false, nil
		}
		left = pendingLeft{pending: pending}
		return len(pending) == 0, nil
	})
	return left, err
}

// FragmentGateways reads the Gateways of frags that exist, for their
// default cache policies.
func (c *Cluster) FragmentGateways(ctx context.Context, frags []*routing.Fragment) ([]*gatewayv1.Gateway, error) {
	var gws []*gatewayv1.Gateway
	for _, f := range frags {
		gw, err := c.getGateway(ctx, f.Gateway)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get Gateway %s for its cache policy: %w", f.Gateway, err)
		}
		gws = append(gws, gw)
	}
	return gws, nil
}
