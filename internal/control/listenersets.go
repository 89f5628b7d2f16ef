package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/applyconfig"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
)

// listenerSetsOf reads the ListenerSets that may add listeners to gw (in
// its namespace with from Same, in every namespace with All and
// Selector; none with None, so that a cluster without the ListenerSet
// CRD serves Gateways that admit none), those whose parentRef names gw,
// and the Namespaces of these ListenerSets when a selector needs their
// labels.
func (c *Cluster) listenerSetsOf(ctx context.Context, gw *gatewayv1.Gateway) ([]*gatewayv1.ListenerSet, []*corev1.Namespace, error) {
	ns := ""
	switch allowedListenersFrom(gw) {
	case gatewayv1.NamespacesFromSame:
		ns = gw.Namespace
	case gatewayv1.NamespacesFromAll, gatewayv1.NamespacesFromSelector:
	default:
		return nil, nil, nil
	}
	list, err := c.Gateway.GatewayV1().ListenerSets(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil // no ListenerSet CRD: no ListenerSets
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list the ListenerSets of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	self := object.Ref{Namespace: gw.Namespace, Name: gw.Name}
	var sets []*gatewayv1.ListenerSet
	var namespaces []*corev1.Namespace
	seen := map[string]bool{}
	for i := range list.Items {
		ls := &list.Items[i]
		if p, ok := routing.ListenerSetParent(ls); !ok || p != self || ls.DeletionTimestamp != nil {
			continue
		}
		sets = append(sets, ls)
		if allowedListenersFrom(gw) != gatewayv1.NamespacesFromSelector || seen[ls.Namespace] {
			continue
		}
		seen[ls.Namespace] = true
		n, err := c.Kube.CoreV1().Namespaces().Get(ctx, ls.Namespace, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("get Namespace %s of ListenerSet %s/%s: %w", ls.Namespace, ls.Namespace, ls.Name, err)
		}
		if err == nil {
			namespaces = append(namespaces, n)
		}
	}
	return sets, namespaces, nil
}

// ComposeGateway is routing.ComposeGateway of gw with the ListenerSets in
// the cluster (listenerSetsOf) and extra, which replaces a listed
// ListenerSet of the same namespace and name (the one being planned).
func (c *Cluster) ComposeGateway(ctx context.Context, gw *gatewayv1.Gateway, extra *gatewayv1.ListenerSet) (*routing.ComposedGateway, error) {
	cg, _, err := c.ComposeGatewaySets(ctx, gw, extra)
	return cg, err
}

// ComposeGatewaySets is composeGateway, which also returns the
// ListenerSets it composed.
func (c *Cluster) ComposeGatewaySets(ctx context.Context, gw *gatewayv1.Gateway, extra *gatewayv1.ListenerSet) (*routing.ComposedGateway, []*gatewayv1.ListenerSet, error) {
	sets, namespaces, err := c.listenerSetsOf(ctx, gw)
	if err != nil {
		return nil, nil, err
	}
	if extra != nil {
		sets = slices.DeleteFunc(sets, func(ls *gatewayv1.ListenerSet) bool {
			return ls.Namespace == extra.Namespace && ls.Name == extra.Name
		})
		sets = append(sets, extra)
		if allowedListenersFrom(gw) == gatewayv1.NamespacesFromSelector && !slices.ContainsFunc(namespaces, func(n *corev1.Namespace) bool { return n.Name == extra.Namespace }) {
			n, err := c.Kube.CoreV1().Namespaces().Get(ctx, extra.Namespace, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, nil, fmt.Errorf("get Namespace %s: %w", extra.Namespace, err)
			}
			if err == nil {
				namespaces = append(namespaces, n)
			}
		}
	}
	grants, err := c.certificateGrants(ctx, sets)
	if err != nil {
		return nil, nil, err
	}
	objs := &routing.Objects{Namespaces: namespaces, ReferenceGrants: grants}
	return routing.ComposeGateway(gw, sets, objs), sets, nil
}

// certificateGrants are the ReferenceGrants of the namespaces, other than
// their ListenerSet's, of the certificate Secrets the HTTPS listeners of
// sets reference: they decide whether those listeners are served.
func (c *Cluster) certificateGrants(ctx context.Context, sets []*gatewayv1.ListenerSet) ([]*gatewayv1.ReferenceGrant, error) {
	var namespaces []string
	for _, ls := range sets {
		for _, l := range ls.Spec.Listeners {
			if l.TLS == nil {
				continue
			}
			for _, r := range l.TLS.CertificateRefs {
				if r.Namespace != nil && string(*r.Namespace) != ls.Namespace && !slices.Contains(namespaces, string(*r.Namespace)) {
					namespaces = append(namespaces, string(*r.Namespace))
				}
			}
		}
	}
	var out []*gatewayv1.ReferenceGrant
	for _, ns := range namespaces {
		list, err := c.Gateway.GatewayV1().ReferenceGrants(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			// A namespace the provider may not read (a ListenerSet of
			// another team may name any): its Secrets count as not
			// permitted, so the listener is not served and no Role is
			// written there, rather than failing the gateway's applies.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list the ReferenceGrants of namespace %s, which decide whether ListenerSets may use certificate Secrets there: %w", ns, err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// WriteListenerSetListeners records the ListenerSet listeners cg serves in
// the Gateway's routing.ListenerSetListenersAnnotation, for its pods, and
// the generations of their ListenerSets in its
// routing.ListenerSetGenerationsAnnotation (the observedGeneration of the
// listeners' ResolvedRefs condition, which the pods write), with the
// annotations' own field manager (an empty value removes one); cg must be
// composed from the live Gateway. Nothing is written when both are
// current.
func (c *Cluster) WriteListenerSetListeners(ctx context.Context, cg *routing.ComposedGateway) error {
	v, err := cg.ListenerSetListeners()
	if err != nil {
		return err
	}
	gens, err := cg.ListenerSetGenerations()
	if err != nil {
		return err
	}
	gw := cg.Gateway // composed from the live Gateway: its annotations are current
	if gw.Annotations[routing.ListenerSetListenersAnnotation] == v && gw.Annotations[routing.ListenerSetGenerationsAnnotation] == gens {
		return nil
	}
	ac := gatewayv1apply.Gateway(gw.Name, gw.Namespace)
	if v != "" {
		ac.WithAnnotations(map[string]string{routing.ListenerSetListenersAnnotation: v})
	}
	if gens != "" {
		ac.WithAnnotations(map[string]string{routing.ListenerSetGenerationsAnnotation: gens})
	}
	opts := metav1.ApplyOptions{FieldManager: routing.ListenerSetListenersManager, Force: true}
	if _, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).Apply(ctx, ac, opts); err != nil {
		return fmt.Errorf("record the ListenerSet listeners of Gateway %s/%s in its annotations %s and %s: %w", gw.Namespace, gw.Name,
			routing.ListenerSetListenersAnnotation, routing.ListenerSetGenerationsAnnotation, err)
	}
	return nil
}

// gatewayLocks are mutexes by Gateway. Terraform applies the ListenerSets
// of one gateway in parallel in one provider process; each apply reads
// every ListenerSet of the gateway and writes the gateway's runtime and
// annotation from them, so two of them at once could each miss the
// other's listeners.
type gatewayLocks struct {
	mu    sync.Mutex
	locks map[object.Ref]*sync.Mutex
}

// lock locks gw's mutex and returns its unlock.
func (g *gatewayLocks) lock(gw object.Ref) func() {
	g.mu.Lock()
	if g.locks == nil {
		g.locks = map[object.Ref]*sync.Mutex{}
	}
	m := g.locks[gw]
	if m == nil {
		m = &sync.Mutex{}
		g.locks[gw] = m
	}
	g.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// WriteListenerSetStatuses rewrites the status of every ListenerSet of gw
// (their listeners' attached routes change when a route attached to one
// of them is written or deleted). A ListenerSet deleted meanwhile is
// skipped.
func (c *Cluster) WriteListenerSetStatuses(ctx context.Context, gw *gatewayv1.Gateway) error {
	defer c.listenerSetLocks.lock(object.Ref{Namespace: gw.Namespace, Name: gw.Name})()
	cg, sets, err := c.ComposeGatewaySets(ctx, gw, nil)
	if err != nil {
		return err
	}
	for _, s := range sets {
		if err := c.WriteListenerSetStatus(ctx, cg, s); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// WriteListenerSetStatus sets the status of ls from cg: its conditions
// and its listeners' (supported kinds, attached routes, conditions). The
// ResolvedRefs condition of an HTTPS listener the pods serve is theirs
// (they read its certificate Secrets and the ReferenceGrants and keep it
// current, gatewaystatus.ListenerSetWriter): it is left out, so that this
// apply neither overwrites nor, as a server-side apply that leaves out a
// field it owned, deletes it. Entries of listeners the ListenerSet no
// longer has are removed first (removeStaleListenerSetEntries). On a
// conflict the ListenerSet is read again and the write made again.
func (c *Cluster) WriteListenerSetStatus(ctx context.Context, cg *routing.ComposedGateway, ls *gatewayv1.ListenerSet) error {
	ns, name := ls.Namespace, ls.Name
	reread := false
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if reread {
			if ls, err = c.Gateway.GatewayV1().ListenerSets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("read ListenerSet %s/%s: %w", ns, name, err)
			}
		}
		reread = true
		if ls, err = c.removeStaleListenerSetEntries(ctx, ls); err != nil {
			return err
		}
		return c.applyListenerSetStatus(ctx, cg, ls)
	})
}

// removeStaleListenerSetEntries removes the status entries of listeners
// ls's spec no longer has (staleListenerPatch).
func (c *Cluster) removeStaleListenerSetEntries(ctx context.Context, ls *gatewayv1.ListenerSet) (*gatewayv1.ListenerSet, error) {
	var spec, status []gatewayv1.SectionName
	for _, l := range ls.Spec.Listeners {
		spec = append(spec, l.Name)
	}
	for _, l := range ls.Status.Listeners {
		status = append(status, l.Name)
	}
	patch := staleListenerPatch(ls.ResourceVersion, spec, status)
	if patch == nil {
		return ls, nil
	}
	out, err := c.Gateway.GatewayV1().ListenerSets(ls.Namespace).Patch(ctx, ls.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if err != nil {
		return nil, staleListenerPatchError(err, "listenersets", "ListenerSet", ls.Namespace, ls.Name)
	}
	return out, nil
}

func (c *Cluster) applyListenerSetStatus(ctx context.Context, cg *routing.ComposedGateway, ls *gatewayv1.ListenerSet) error {
	var res *routing.ListenerSetResult
	for i := range cg.ListenerSets {
		if cg.ListenerSets[i].Set.Namespace == ls.Namespace && cg.ListenerSets[i].Set.Name == ls.Name {
			res = &cg.ListenerSets[i]
		}
	}
	if res == nil {
		return fmt.Errorf("ListenerSet %s/%s does not name Gateway %s/%s", ls.Namespace, ls.Name, cg.Gateway.Namespace, cg.Gateway.Name)
	}
	attached, err := c.AttachedRoutes(ctx, cg.Gateway)
	if err != nil {
		return err
	}
	st := gatewayv1apply.ListenerSetStatus()
	for _, cd := range res.Conditions {
		st.WithConditions(status.Condition(ls.Status.Conditions, metav1.Condition{Type: cd.Type, Status: metav1.ConditionStatus(cd.Status),
			Reason: cd.Reason, Message: cd.Message, ObservedGeneration: ls.Generation}))
	}
	for _, l := range res.Listeners {
		var old []metav1.Condition
		for _, o := range ls.Status.Listeners {
			if string(o.Name) == l.Name {
				old = o.Conditions
			}
		}
		es := gatewayv1apply.ListenerEntryStatus().WithName(gatewayv1.SectionName(l.Name)).WithAttachedRoutes(attached[l.Key])
		es.SupportedKinds = []gatewayv1apply.RouteGroupKindApplyConfiguration{}
		for _, k := range l.SupportedKinds {
			es.WithSupportedKinds(gatewayv1apply.RouteGroupKind().WithGroup(*k.Group).WithKind(k.Kind))
		}
		podsResolve := l.Served && l.Protocol == gatewayv1.HTTPSProtocolType
		for _, cd := range l.Conditions {
			if podsResolve && cd.Type == string(gatewayv1.ListenerEntryConditionResolvedRefs) {
				continue // the pods'
			}
			es.WithConditions(status.Condition(old, metav1.Condition{Type: cd.Type, Status: metav1.ConditionStatus(cd.Status),
				Reason: cd.Reason, Message: cd.Message, ObservedGeneration: ls.Generation}))
		}
		st.WithListeners(es)
	}
	ac := gatewayv1apply.ListenerSet(ls.Name, ls.Namespace).WithResourceVersion(ls.ResourceVersion).WithStatus(st)
	if _, err := c.Gateway.GatewayV1().ListenerSets(ls.Namespace).ApplyStatus(ctx, ac, ApplyOptions()); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("set the status of ListenerSet %s/%s: %w", ls.Namespace, ls.Name, err)
	}
	return nil
}

// allowedListenersFrom is the from of gw's allowedListeners: None when it
// has none.
func allowedListenersFrom(gw *gatewayv1.Gateway) gatewayv1.FromNamespaces {
	if al := gw.Spec.AllowedListeners; al != nil && al.Namespaces != nil && al.Namespaces.From != nil {
		return *al.Namespaces.From
	}
	return gatewayv1.NamespacesFromNone
}

// LockGateway locks, for this run, the ListenerSet applies of gw (their
// writes of the gateway's runtime and annotation) and returns the unlock.
func (c *Cluster) LockGateway(gw object.Ref) func() { return c.listenerSetLocks.lock(gw) }

// NamesListenerSet reports whether a parentRef of route names a
// ListenerSet.
func NamesListenerSet(route *gatewayv1.HTTPRoute) bool {
	return slices.ContainsFunc(route.Spec.ParentRefs, func(p gatewayv1.ParentReference) bool {
		return p.Kind != nil && *p.Kind == listenerSetKind
	})
}

// ApplyListenerSet writes ls's labels and spec (every field of the typed
// spec, applyconfig) and returns the stored ListenerSet.
func (c *Cluster) ApplyListenerSet(ctx context.Context, ls *gatewayv1.ListenerSet) (*gatewayv1.ListenerSet, error) {
	ac := gatewayv1apply.ListenerSet(ls.Name, ls.Namespace).WithLabels(ls.Labels).
		WithSpec(applyconfig.Of[gatewayv1apply.ListenerSetSpecApplyConfiguration](ls.Spec))
	live, err := c.Gateway.GatewayV1().ListenerSets(ls.Namespace).Apply(ctx, ac, ApplyOptions())
	if err != nil {
		return nil, fmt.Errorf("apply ListenerSet %s/%s: %w", ls.Namespace, ls.Name, err)
	}
	return live, nil
}

// AddListenerSetPorts adds to s the ports of the ListenerSet listeners that cg
// serves to its ports: the Service's ports and varnishd's listen
// addresses; those of HTTPS listeners to the ports hitch terminates TLS
// on, their certificate Secrets to those the pods may read
// (routing.CertificateSecrets of the composed Gateway: a ListenerSet's
// Secret in its own namespace, or in the one a ReferenceGrant opened),
// and their ListenerSets to those whose status the pods may patch (they
// write the ResolvedRefs condition of these listeners).
func AddListenerSetPorts(s *gwruntime.Spec, cg *routing.ComposedGateway) {
	for _, r := range cg.ListenerSets {
		for _, l := range r.Listeners {
			if !l.Served {
				continue
			}
			if !slices.Contains(s.Ports, l.Port) {
				s.Ports = append(s.Ports, l.Port)
			}
			if l.Protocol != gatewayv1.HTTPSProtocolType {
				continue
			}
			if !slices.Contains(s.TLSPorts, l.Port) {
				s.TLSPorts = append(s.TLSPorts, l.Port)
			}
			if !slices.Contains(s.ListenerSets, r.Set) {
				s.ListenerSets = append(s.ListenerSets, r.Set)
			}
		}
	}
	slices.Sort(s.Ports)
	slices.Sort(s.TLSPorts)
	slices.SortFunc(s.ListenerSets, func(a, b object.Ref) int { return strings.Compare(a.String(), b.String()) })
	for _, ref := range routing.CertificateSecrets(cg.Gateway) {
		if !slices.Contains(s.CertSecrets, ref) {
			s.CertSecrets = append(s.CertSecrets, ref)
		}
	}
	slices.SortFunc(s.CertSecrets, func(a, b object.Ref) int { return strings.Compare(a.String(), b.String()) })
}
