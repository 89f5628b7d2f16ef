package provider

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// allowedListenersFrom is the from of gw's allowedListeners: None when it
// has none.
func allowedListenersFrom(gw *gatewayv1.Gateway) gatewayv1.FromNamespaces {
	if al := gw.Spec.AllowedListeners; al != nil && al.Namespaces != nil && al.Namespaces.From != nil {
		return *al.Namespaces.From
	}
	return gatewayv1.NamespacesFromNone
}

// listenerSetsOf reads the ListenerSets that may add listeners to gw (in
// its namespace with from Same, in every namespace with All and
// Selector; none with None, so that a cluster without the ListenerSet
// CRD serves Gateways that admit none), those whose parentRef names gw,
// and the Namespaces of these ListenerSets when a selector needs their
// labels.
func (c *clients) listenerSetsOf(ctx context.Context, gw *gatewayv1.Gateway) ([]*gatewayv1.ListenerSet, []*corev1.Namespace, error) {
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
	self := routing.ObjectRef{Namespace: gw.Namespace, Name: gw.Name}
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

// composeGateway is routing.ComposeGateway of gw with the ListenerSets in
// the cluster (listenerSetsOf) and extra, which replaces a listed
// ListenerSet of the same namespace and name (the one being planned).
func (c *clients) composeGateway(ctx context.Context, gw *gatewayv1.Gateway, extra *gatewayv1.ListenerSet) (*routing.ComposedGateway, error) {
	cg, _, err := c.composeGatewaySets(ctx, gw, extra)
	return cg, err
}

// composeGatewaySets is composeGateway, which also returns the
// ListenerSets it composed.
func (c *clients) composeGatewaySets(ctx context.Context, gw *gatewayv1.Gateway, extra *gatewayv1.ListenerSet) (*routing.ComposedGateway, []*gatewayv1.ListenerSet, error) {
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
func (c *clients) certificateGrants(ctx context.Context, sets []*gatewayv1.ListenerSet) ([]*gatewayv1.ReferenceGrant, error) {
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

// writeListenerSetListeners records the ListenerSet listeners cg serves in
// the Gateway's routing.ListenerSetListenersAnnotation, for its pods, and
// the generations of their ListenerSets in its
// routing.ListenerSetGenerationsAnnotation (the observedGeneration of the
// listeners' ResolvedRefs condition, which the pods write), with the
// annotations' own field manager (an empty value removes one); cg must be
// composed from the live Gateway. Nothing is written when both are
// current.
func (c *clients) writeListenerSetListeners(ctx context.Context, cg *routing.ComposedGateway) error {
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

// allowedListenersModel is the gateway's allowed_listeners block.
type allowedListenersModel struct {
	Namespaces types.String `tfsdk:"namespaces"`
	Selector   types.Map    `tfsdk:"selector"`
}

var allowedListenersType = map[string]attr.Type{
	"namespaces": types.StringType,
	"selector":   types.MapType{ElemType: types.StringType},
}

// allowedListeners converts the allowed_listeners block: nil when it is
// absent (the Gateway admits no ListenerSet).
func (m *gatewayModel) allowedListeners(ctx context.Context) (*gatewayv1.AllowedListeners, error) {
	if m.AllowedListeners.IsNull() || m.AllowedListeners.IsUnknown() {
		return nil, nil
	}
	var al allowedListenersModel
	if d := m.AllowedListeners.As(ctx, &al, basetypes.ObjectAsOptions{}); d.HasError() {
		return nil, fmt.Errorf("read allowed_listeners: %v", d)
	}
	from := gatewayv1.NamespacesFromNone
	if !al.Namespaces.IsNull() && al.Namespaces.ValueString() != "" {
		from = gatewayv1.FromNamespaces(al.Namespaces.ValueString())
	}
	out := &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: &from}}
	if sel := stringMap(al.Selector); len(sel) > 0 {
		out.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: sel}
	}
	return out, nil
}

// readAllowedListeners is the allowed_listeners block for a live Gateway:
// null without allowedListeners; namespaces stays unset when prior had it
// unset and the Gateway has the default, None.
func readAllowedListeners(ctx context.Context, prior types.Object, al *gatewayv1.AllowedListeners) types.Object {
	if al == nil || al.Namespaces == nil {
		return types.ObjectNull(allowedListenersType)
	}
	from := types.StringValue(string(gatewayv1.NamespacesFromNone))
	if al.Namespaces.From != nil {
		from = types.StringValue(string(*al.Namespaces.From))
	}
	var was allowedListenersModel
	if !prior.IsNull() && !prior.IsUnknown() {
		if d := prior.As(ctx, &was, basetypes.ObjectAsOptions{}); !d.HasError() && was.Namespaces.IsNull() && from.ValueString() == string(gatewayv1.NamespacesFromNone) {
			from = types.StringNull()
		}
	}
	sel := types.MapNull(types.StringType)
	if s := al.Namespaces.Selector; s != nil && len(s.MatchLabels) > 0 {
		sel = stringMapValue(s.MatchLabels)
	}
	return types.ObjectValueMust(allowedListenersType, map[string]attr.Value{"namespaces": from, "selector": sel})
}

// allowedListenersApply is the apply configuration of allowedListeners.
func allowedListenersApply(al *gatewayv1.AllowedListeners) *gatewayv1apply.AllowedListenersApplyConfiguration {
	ns := gatewayv1apply.ListenerNamespaces()
	if al.Namespaces != nil {
		if al.Namespaces.From != nil {
			ns.WithFrom(*al.Namespaces.From)
		}
		if s := al.Namespaces.Selector; s != nil {
			ns.WithSelector(metav1apply.LabelSelector().WithMatchLabels(s.MatchLabels))
		}
	}
	return gatewayv1apply.AllowedListeners().WithNamespaces(ns)
}

// addListenerSets adds the ports of the ListenerSet listeners the gateway
// of m serves to spec.
func (c *clients) addListenerSets(ctx context.Context, m *gatewayModel, spec *gwruntime.Spec) error {
	gw, err := m.toGateway(ctx)
	if err != nil {
		return err
	}
	cg, err := c.composeGateway(ctx, gw, nil)
	if err != nil {
		return err
	}
	spec.AddListenerSetPorts(cg)
	return nil
}

// gatewayLocks are mutexes by Gateway. Terraform applies the ListenerSets
// of one gateway in parallel in one provider process; each apply reads
// every ListenerSet of the gateway and writes the gateway's runtime and
// annotation from them, so two of them at once could each miss the
// other's listeners.
type gatewayLocks struct {
	mu    sync.Mutex
	locks map[routing.ObjectRef]*sync.Mutex
}

// lock locks gw's mutex and returns its unlock.
func (g *gatewayLocks) lock(gw routing.ObjectRef) func() {
	g.mu.Lock()
	if g.locks == nil {
		g.locks = map[routing.ObjectRef]*sync.Mutex{}
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

// writeListenerSetStatuses rewrites the status of every ListenerSet of gw
// (their listeners' attached routes change when a route attached to one
// of them is written or deleted). A ListenerSet deleted meanwhile is
// skipped.
func (c *clients) writeListenerSetStatuses(ctx context.Context, gw *gatewayv1.Gateway) error {
	defer c.listenerSetLocks.lock(routing.ObjectRef{Namespace: gw.Namespace, Name: gw.Name})()
	cg, sets, err := c.composeGatewaySets(ctx, gw, nil)
	if err != nil {
		return err
	}
	for _, s := range sets {
		if err := c.writeListenerSetStatus(ctx, cg, s); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// namesListenerSet reports whether a parentRef of route names a
// ListenerSet.
func namesListenerSet(route *gatewayv1.HTTPRoute) bool {
	return slices.ContainsFunc(route.Spec.ParentRefs, func(p gatewayv1.ParentReference) bool {
		return p.Kind != nil && *p.Kind == listenerSetKind
	})
}
