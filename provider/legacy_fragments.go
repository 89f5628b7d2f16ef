package provider

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// The upgrade from releases that stored fragments in ConfigMaps (labelled
// varnishgw.dev/gateway, key fragment.json, annotated with their route),
// which their chaperones read:
//
//  1. a gateway's apply copies its routes' fragment ConfigMaps into
//     RoutingFragments before its pods roll, so that the new pods serve
//     every route from their start (migrateLegacyFragments);
//  2. after the rollout it checks that every pod runs a chaperone of this
//     release, which writes a GatewayPodReport (checkChaperones);
//  3. a route's apply deletes its fragment ConfigMap once no pod of the
//     Gateway runs an earlier chaperone, which still serves from it, not
//     even a terminating one that drains its connections
//     (retireLegacyFragments).

// legacyFragmentKey is the data key of the fragment ConfigMaps.
const legacyFragmentKey = "fragment.json"

// legacyFragments are, per Gateway, the names of the fragment ConfigMaps of
// an earlier release, listed once per provider process (one LIST instead of
// a GET per route): this release writes none, so the list only shrinks as
// routes retire them.
type legacyFragments struct {
	mu    sync.Mutex
	names map[routing.ObjectRef]map[string]bool
}

// has reports whether gw has the fragment ConfigMap name of an earlier
// release (one of its ConfigMaps that carries a route annotation).
func (l *legacyFragments) has(ctx context.Context, c *clients, gw routing.ObjectRef, name string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	names, ok := l.names[gw]
	if !ok {
		list, err := c.kube.CoreV1().ConfigMaps(gw.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(gwruntime.GatewayLabels(gw)).String(),
		})
		if err != nil {
			return false, fmt.Errorf("list the fragment ConfigMaps of Gateway %s written by an earlier release: %w", gw, err)
		}
		names = map[string]bool{}
		for _, cm := range list.Items {
			if cm.Annotations[fragmentRouteAnnotation] != "" {
				names[cm.Name] = true
			}
		}
		if l.names == nil {
			l.names = map[routing.ObjectRef]map[string]bool{}
		}
		l.names[gw] = names
	}
	return names[name], nil
}

// forget records that gw's fragment ConfigMap name is gone.
func (l *legacyFragments) forget(gw routing.ObjectRef, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.names[gw], name)
}

// migrateLegacyFragments writes a RoutingFragment for each fragment
// ConfigMap of gw that the provider wrote for a route that still exists
// (a varnishgw-managed HTTPRoute, the same one when the fragment names its
// UID) and that has no RoutingFragment yet. It returns how many it wrote.
func (c *clients) migrateLegacyFragments(ctx context.Context, gw routing.ObjectRef) (int, error) {
	list, err := c.kube.CoreV1().ConfigMaps(gw.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.GatewayLabels(gw)).String(),
	})
	if err != nil {
		return 0, fmt.Errorf("list the fragment ConfigMaps of Gateway %s written by an earlier release: %w", gw, err)
	}
	n := 0
	for _, cm := range list.Items {
		data, ok := cm.Data[legacyFragmentKey]
		route := cm.Annotations[fragmentRouteAnnotation]
		if !ok || route == "" {
			continue // not a fragment the provider wrote (the VCL ConfigMap carries the label too)
		}
		f, err := routing.UnmarshalFragment([]byte(data))
		if err != nil || f.Gateway != gw || (routing.ObjectRef{Namespace: f.Route.Namespace, Name: f.Route.Name}).String() != route ||
			cm.Name != gwruntime.FragmentName(gw, routing.ObjectRef{Namespace: f.Route.Namespace, Name: f.Route.Name}) {
			continue // unreadable or inconsistent: the route's next apply writes it afresh
		}
		live, err := c.gateway.GatewayV1().HTTPRoutes(f.Route.Namespace).Get(ctx, f.Route.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("get HTTPRoute %s: %w", route, err)
		}
		if live.Labels["app.kubernetes.io/managed-by"] != managedLabels["app.kubernetes.io/managed-by"] || (f.Route.UID != "" && types.UID(f.Route.UID) != live.UID) {
			continue
		}
		name := gwruntime.FragmentName(gw, routing.ObjectRef{Namespace: f.Route.Namespace, Name: f.Route.Name})
		if _, err := c.dynamic.Resource(vgwapi.RoutingFragments).Namespace(gw.Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			continue // written by a route's apply already
		} else if !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("get the RoutingFragment %s/%s: %w", gw.Namespace, name, err)
		}
		obj, err := vgwapi.NewFragment(f)
		if err != nil {
			return n, err
		}
		lbl := obj.GetLabels()
		for k, v := range managedLabels {
			lbl[k] = v
		}
		obj.SetLabels(lbl)
		if _, err := c.dynamic.Resource(vgwapi.RoutingFragments).Namespace(gw.Namespace).Apply(ctx, name, obj, applyOptions()); err != nil {
			return n, fmt.Errorf("copy the fragment ConfigMap %s/%s into a RoutingFragment: %w", gw.Namespace, cm.Name, err)
		}
		n++
	}
	return n, nil
}

// earlierChaperones are the pods of gw that run a chaperone of an earlier
// release, which reads fragment ConfigMaps: those without a
// GatewayPodReport that have been Ready for at least grace (ready), and
// the terminating ones without a report, which may still answer requests on
// their open connections while they drain (terminating).
func (c *clients) earlierChaperones(ctx context.Context, gw routing.ObjectRef, grace time.Duration) (ready, terminating []corev1.Pod, err error) {
	pods, err := c.kube.CoreV1().Pods(gw.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.Labels(gw)).String(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list the pods of Gateway %s: %w", gw, err)
	}
	if len(pods.Items) == 0 {
		return nil, nil, nil
	}
	reports, err := vgwapi.ReadReports(ctx, c.dynamic, gw)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, err
	}
	for _, p := range pods.Items {
		if reports[p.Name] != nil {
			continue
		}
		if p.DeletionTimestamp != nil {
			terminating = append(terminating, p)
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && time.Since(cond.LastTransitionTime.Time) >= grace {
				ready = append(ready, p)
			}
		}
	}
	return ready, terminating, nil
}

func podNames(pods []corev1.Pod) string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// checkImageUpgrade fails, before anything is written, when pods of gw run
// a chaperone of an earlier release and this apply keeps their image: the
// pods would roll to the same earlier chaperone, which cannot read what
// this provider writes.
func (c *clients) checkImageUpgrade(ctx context.Context, gw routing.ObjectRef, image string) error {
	// A pod of this release writes its report right after its first load:
	// give a Ready pod without one that long before judging it.
	var same []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, reportGrace, true, func(ctx context.Context) (bool, error) {
		ready, _, err := c.earlierChaperones(ctx, gw, 0)
		if err != nil {
			return false, err
		}
		same = same[:0]
		for _, p := range ready {
			for _, ctr := range p.Spec.Containers {
				if ctr.Name == chaperoneName && ctr.Image == image {
					same = append(same, p)
				}
			}
		}
		return len(same) == 0, nil
	})
	if err == nil {
		return nil
	}
	if len(same) == 0 {
		return err
	}
	return fmt.Errorf("the pods %s of Gateway %s run a chaperone older than this provider (they write no GatewayPodReport), "+
		"and this apply keeps their image %s: set the class's image to the gateway image of this provider's release "+
		"(make image builds it) and apply again. Nothing was written; the pods keep serving as before", podNames(same), gw, image)
}

// retireLegacyFragments deletes the fragment ConfigMaps an earlier release
// wrote for route on the Gateways of writes, once no pod of that release
// serves from them: it waits, up to timeout, for such pods that are
// terminating to be gone, and keeps the ConfigMap while one is Ready (its
// image is of the earlier release; checkChaperones says so).
func (c *clients) retireLegacyFragments(ctx context.Context, route routing.ObjectRef, writes []fragmentWrite, timeout time.Duration) error {
	for _, gw := range writtenGateways(writes) {
		if has, err := c.legacy.has(ctx, c, gw, gwruntime.FragmentName(gw, route)); err != nil {
			return err
		} else if !has {
			continue
		}
		var ready, terminating []corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			var err error
			ready, terminating, err = c.earlierChaperones(ctx, gw, 0)
			return err == nil && len(terminating) == 0, err
		})
		if err != nil && len(terminating) == 0 {
			return err
		}
		if len(ready) > 0 || len(terminating) > 0 {
			continue // still served from: a later apply deletes it
		}
		if err := c.deleteLegacyFragment(ctx, gw, route); err != nil {
			return err
		}
	}
	return nil
}

// reportGrace is how long a Ready pod may go without a GatewayPodReport
// before it counts as running an earlier chaperone (a new one writes its
// report right after it loads its first routing).
const reportGrace = 20 * time.Second

// checkChaperones fails when, after the rollout, pods of gw still run a
// chaperone of an earlier release.
func (c *clients) checkChaperones(ctx context.Context, gw routing.ObjectRef) error {
	var earlier []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*reportGrace, true, func(ctx context.Context) (bool, error) {
		var err error
		earlier, _, err = c.earlierChaperones(ctx, gw, reportGrace)
		return err == nil && len(earlier) == 0, err
	})
	if err == nil {
		return nil
	}
	if len(earlier) > 0 {
		return fmt.Errorf("the pods %s of Gateway %s run a chaperone older than this provider (they write no GatewayPodReport): "+
			"set the class's image to the gateway image of this provider's release (make image builds it) and apply again. "+
			"Until then they keep serving the routes as before, from the fragment ConfigMaps of the earlier release, "+
			"which the routes keep", podNames(earlier), gw)
	}
	return err
}
