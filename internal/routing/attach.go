package routing

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
)

// ErrNotParent is returned by Attach when no parentRef of the route names
// the Gateway.
var ErrNotParent = errors.New("the route has no parentRef to this Gateway")

// Objects are the cluster objects routing decisions depend on. The provider
// fills it from its plan and the API, the chaperone from informers; nothing
// here calls an API server. Nil entries are ignored.
type Objects struct {
	// Namespaces are needed for listeners with allowedRoutes.namespaces.from
	// Selector (their labels).
	Namespaces []*corev1.Namespace
	// Services are the Services backendRefs may name.
	Services []*corev1.Service
	// EndpointSlices are read by Resolve only.
	EndpointSlices []*discoveryv1.EndpointSlice
	// ReferenceGrants allow cross-namespace backendRefs, and the
	// certificateRefs of ListenerSets' HTTPS listeners to Secrets of
	// other namespaces (ComposeGateway).
	ReferenceGrants []*gatewayv1.ReferenceGrant
	// ExternalNameServices is set when the Gateway's class lets
	// backendRefs name Services of type ExternalName (the class's
	// external_name_services, the chaperone's --external-name-services).
	// Unset, such a reference does not resolve (BackendNotFound) and its
	// share of requests gets 500.
	ExternalNameServices bool
	// ExternalNames are the addresses the DNS names of ExternalName
	// Services resolve to, by ExternalNameHost; read by Resolve only, and
	// only with ExternalNameServices. The chaperone resolves them (see
	// ExternalNameHosts); nothing here calls DNS. A name without an entry
	// has no endpoints.
	ExternalNames map[string][]netip.Addr
	// ListenerSets are the ListenerSets that may add listeners to the
	// Gateway (ComposeGateway); Attach composes the Gateway with them.
	// Without them, Attach sees the listeners of the Gateway it is given
	// (which may already be composed).
	ListenerSets []*gatewayv1.ListenerSet

	// An index of Services by namespace and name, built on first use by
	// Attach: do not change Services after the first call.
	indexOnce sync.Once
	services  map[nsName]*corev1.Service
}

type nsName struct{ ns, name string }

// WithExternalNameServices returns o with ExternalNameServices set to on:
// o itself when it already is, else a copy sharing o's objects (for
// parent Gateways of different classes).
func (o *Objects) WithExternalNameServices(on bool) *Objects {
	if o == nil {
		return &Objects{ExternalNameServices: on}
	}
	if o.ExternalNameServices == on {
		return o
	}
	return &Objects{Namespaces: o.Namespaces, Services: o.Services, EndpointSlices: o.EndpointSlices,
		ReferenceGrants: o.ReferenceGrants, ExternalNameServices: on, ExternalNames: o.ExternalNames,
		ListenerSets: o.ListenerSets}
}

// namespaceLabels returns the labels of namespace ns. The API server sets
// kubernetes.io/metadata.name on every namespace; it is added here too, so
// a selector on it works even when the Namespace object is not at hand.
func (o *Objects) namespaceLabels(ns string) labels.Set {
	set := labels.Set{corev1.LabelMetadataName: ns}
	if o == nil {
		return set
	}
	for _, n := range o.Namespaces {
		if n != nil && n.Name == ns {
			for k, v := range n.Labels {
				set[k] = v
			}
			set[corev1.LabelMetadataName] = ns
		}
	}
	return set
}

func (o *Objects) service(ns, name string) *corev1.Service {
	if o == nil {
		return nil
	}
	o.indexOnce.Do(func() {
		o.services = make(map[nsName]*corev1.Service, len(o.Services))
		for _, s := range o.Services {
			if s != nil {
				o.services[nsName{s.Namespace, s.Name}] = s
			}
		}
	})
	return o.services[nsName{ns, name}]
}

// refPermitted reports whether a ReferenceGrant in toNS lets HTTPRoutes in
// fromNS reference the Service name.
func refPermitted(grants []*gatewayv1.ReferenceGrant, fromNS, toNS, name string) bool {
	for _, g := range grants {
		if g == nil || g.Namespace != toNS {
			continue
		}
		from := slices.ContainsFunc(g.Spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
			return f.Group == gatewayv1.GroupName && f.Kind == "HTTPRoute" && string(f.Namespace) == fromNS
		})
		if !from {
			continue
		}
		if slices.ContainsFunc(g.Spec.To, func(t gatewayv1.ReferenceGrantTo) bool {
			return (t.Group == "" || t.Group == "core") && t.Kind == "Service" && (t.Name == nil || *t.Name == "" || string(*t.Name) == name)
		}) {
			return true
		}
	}
	return false
}

// Attach binds route to gw. It checks each parentRef that names gw against
// the listeners (sectionName, port, allowed kinds and namespaces, hostname
// intersection), validates the route (ValidateHTTPRoute), checks backend
// references (kind, ReferenceGrant, existence) and returns the Fragment:
// the accepted listeners with the intersected hostnames, the normalised
// rules and the conditions for each parentRef. A route that is not accepted
// still gets a Fragment (with its conditions, no listeners and no rules).
// Attach returns an error wrapping ErrNotParent when the route does not name
// gw at all.
func Attach(gw *gatewayv1.Gateway, route *gatewayv1.HTTPRoute, objs *Objects) (*Fragment, error) {
	if gw == nil || route == nil {
		return nil, fmt.Errorf("attach: nil Gateway or HTTPRoute")
	}
	if route.Namespace == "" || route.Name == "" {
		return nil, fmt.Errorf("attach: HTTPRoute %q in namespace %q: metadata.name and metadata.namespace must be set", route.Name, route.Namespace)
	}
	if gw.Namespace == "" || gw.Name == "" {
		return nil, fmt.Errorf("attach: Gateway %q in namespace %q: metadata.name and metadata.namespace must be set", gw.Name, gw.Namespace)
	}
	// sets holds the ListenerSets of gw: accepted (true) or not (false).
	sets := map[object.Ref]bool{}
	if objs != nil && len(objs.ListenerSets) > 0 {
		c := ComposeGateway(gw, objs.ListenerSets, objs)
		gw = c.Gateway
		for _, r := range c.ListenerSets {
			sets[r.Set] = r.Accepted()
		}
	}
	for _, l := range gw.Spec.Listeners {
		if set, _, ok := parseListenerKey(string(l.Name)); ok {
			sets[set] = true
		}
	}
	f := &Fragment{
		Version: FragmentVersion,
		Gateway: object.Ref{Namespace: gw.Namespace, Name: gw.Name},
		Route: RouteRef{
			Namespace:         route.Namespace,
			Name:              route.Name,
			UID:               string(route.UID),
			Generation:        route.Generation,
			CreationTimestamp: route.CreationTimestamp.UTC(),
		},
	}
	specErrs := ValidateHTTPRoute(route)
	resolved := checkBackendRefs(route, objs)
	routeHosts := make([]string, len(route.Spec.Hostnames))
	for i, h := range route.Spec.Hostnames {
		routeHosts[i] = strings.ToLower(string(h))
	}
	attached := map[string]map[string]bool{} // listener name -> hostnames
	for _, pr := range route.Spec.ParentRefs {
		var accepted Condition
		if namesGateway(pr, route.Namespace, gw) {
			accepted = attachParent(gw, nil, pr, route.Namespace, routeHosts, objs, attached, len(specErrs) == 0)
		} else if set, ok := namesListenerSet(pr, route.Namespace); ok {
			admitted, known := sets[set]
			switch {
			case !known:
				continue
			case !admitted:
				accepted = Condition{
					Type:    string(gatewayv1.RouteConditionAccepted),
					Status:  string(metav1.ConditionFalse),
					Reason:  string(gatewayv1.RouteReasonNotAllowedByListeners),
					Message: fmt.Sprintf("ListenerSet %s is not accepted by Gateway %s/%s: see the ListenerSet's conditions", set, gw.Namespace, gw.Name),
				}
			default:
				accepted = attachParent(gw, &set, pr, route.Namespace, routeHosts, objs, attached, len(specErrs) == 0)
			}
		} else {
			continue
		}
		if accepted.Status == string(metav1.ConditionTrue) && len(specErrs) > 0 {
			accepted = Condition{
				Type:    string(gatewayv1.RouteConditionAccepted),
				Status:  string(metav1.ConditionFalse),
				Reason:  string(gatewayv1.RouteReasonUnsupportedValue),
				Message: status.TruncateMessage(specErrs.ToAggregate().Error()),
			}
		}
		f.Parents = append(f.Parents, ParentStatus{ParentRef: pr, Conditions: []Condition{accepted, resolved.condition}})
	}
	if len(f.Parents) == 0 {
		return nil, fmt.Errorf("attach HTTPRoute %s/%s to Gateway %s/%s: %w", route.Namespace, route.Name, gw.Namespace, gw.Name, ErrNotParent)
	}
	if len(attached) > 0 {
		for _, l := range gw.Spec.Listeners {
			hs, ok := attached[string(l.Name)]
			if !ok {
				continue
			}
			al := AttachedListener{Name: string(l.Name), Port: l.Port}
			for h := range hs {
				al.Hostnames = append(al.Hostnames, h)
			}
			slices.Sort(al.Hostnames)
			f.Listeners = append(f.Listeners, al)
		}
		slices.SortFunc(f.Listeners, func(a, b AttachedListener) int { return strings.Compare(a.Name, b.Name) })
		f.Rules = normalizeRules(route, resolved.refs)
	}
	if f.Listeners == nil {
		f.Listeners = []AttachedListener{}
	}
	if f.Rules == nil {
		f.Rules = []Rule{}
	}
	return f, nil
}

// SameParentRef reports whether a and b, parentRefs of a route in
// routeNS, name the same parent (group, kind, namespace and name, defaulted
// as the API does), section and port: whether a status.parents entry of
// one is the other's.
func SameParentRef(a, b gatewayv1.ParentReference, routeNS string) bool {
	key := func(p gatewayv1.ParentReference) [6]string {
		k := [6]string{gatewayv1.GroupName, "Gateway", routeNS, string(p.Name), "", ""}
		if p.Group != nil {
			k[0] = string(*p.Group)
		}
		if p.Kind != nil {
			k[1] = string(*p.Kind)
		}
		if p.Namespace != nil {
			k[2] = string(*p.Namespace)
		}
		if p.SectionName != nil {
			k[4] = string(*p.SectionName)
		}
		if p.Port != nil {
			k[5] = strconv.Itoa(int(*p.Port))
		}
		return k
	}
	return key(a) == key(b)
}

// namesGateway reports whether the parentRef names gw.
func namesGateway(pr gatewayv1.ParentReference, routeNS string, gw *gatewayv1.Gateway) bool {
	if pr.Group != nil && *pr.Group != gatewayv1.GroupName {
		return false
	}
	if pr.Kind != nil && *pr.Kind != "Gateway" {
		return false
	}
	ns := routeNS
	if pr.Namespace != nil {
		ns = string(*pr.Namespace)
	}
	return ns == gw.Namespace && string(pr.Name) == gw.Name
}

// namesListenerSet returns the ListenerSet the parentRef names, if it
// names one.
func namesListenerSet(pr gatewayv1.ParentReference, routeNS string) (object.Ref, bool) {
	// The group defaults to gateway.networking.k8s.io, as for a Gateway
	// (the CRD sets it; a parentRef built in code may leave it out); the
	// kind has no default but Gateway.
	if (pr.Group != nil && *pr.Group != gatewayv1.GroupName) || pr.Kind == nil || *pr.Kind != "ListenerSet" {
		return object.Ref{}, false
	}
	ref := object.Ref{Namespace: routeNS, Name: string(pr.Name)}
	if pr.Namespace != nil {
		ref.Namespace = string(*pr.Namespace)
	}
	return ref, true
}

// attachParent returns the Accepted condition for one parentRef and, when
// accept is true, records the listeners and hostnames it attaches to. The
// parentRef names gw when set is nil, else the ListenerSet set of gw: it
// sees only the listeners of its parent, and sectionName names one of
// these.
func attachParent(gw *gatewayv1.Gateway, set *object.Ref, pr gatewayv1.ParentReference, routeNS string, routeHosts []string, objs *Objects, attached map[string]map[string]bool, accept bool) Condition {
	cond := func(ok bool, reason gatewayv1.RouteConditionReason, msg string) Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return Condition{Type: string(gatewayv1.RouteConditionAccepted), Status: string(s), Reason: string(reason), Message: msg}
	}
	var candidates []*gatewayv1.Listener
	for i := range gw.Spec.Listeners {
		l := &gw.Spec.Listeners[i]
		section := string(l.Name)
		if ls, name, ok := parseListenerKey(section); ok {
			if set == nil || ls != *set {
				continue
			}
			section = name
		} else if set != nil {
			continue
		}
		if pr.SectionName != nil && string(*pr.SectionName) != section {
			continue
		}
		if pr.Port != nil && *pr.Port != l.Port {
			continue
		}
		candidates = append(candidates, l)
	}
	parent, sameNS := fmt.Sprintf("Gateway %s/%s", gw.Namespace, gw.Name), gw.Namespace
	if set != nil {
		parent, sameNS = "ListenerSet "+set.String(), set.Namespace
	}
	if len(candidates) == 0 {
		return cond(false, gatewayv1.RouteReasonNoMatchingParent, fmt.Sprintf("%s has no listener%s", parent, parentRefDesc(pr)))
	}
	var allowed []*gatewayv1.Listener
	var why []string
	for _, l := range candidates {
		if msg := listenerAllows(l, routeNS, sameNS, objs); msg != "" {
			why = append(why, msg)
			continue
		}
		allowed = append(allowed, l)
	}
	if len(allowed) == 0 {
		return cond(false, gatewayv1.RouteReasonNotAllowedByListeners, strings.Join(why, "; "))
	}
	matched := 0
	for _, l := range allowed {
		lh := ""
		if l.Hostname != nil {
			lh = strings.ToLower(string(*l.Hostname))
		}
		hs := intersectHostnames(lh, routeHosts)
		if len(hs) == 0 {
			continue
		}
		matched++
		if !accept {
			continue
		}
		m := attached[string(l.Name)]
		if m == nil {
			m = map[string]bool{}
			attached[string(l.Name)] = m
		}
		for _, h := range hs {
			m[h] = true
		}
	}
	if matched == 0 {
		return cond(false, gatewayv1.RouteReasonNoMatchingListenerHostname, fmt.Sprintf("no hostname of the route (%s) intersects the hostname of an allowed listener", strings.Join(routeHosts, ", ")))
	}
	return cond(true, gatewayv1.RouteReasonAccepted, fmt.Sprintf("attached to %d listener(s)", matched))
}

func parentRefDesc(pr gatewayv1.ParentReference) string {
	var parts []string
	if pr.SectionName != nil {
		parts = append(parts, fmt.Sprintf(" named %q", *pr.SectionName))
	}
	if pr.Port != nil {
		parts = append(parts, fmt.Sprintf(" on port %d", *pr.Port))
	}
	if len(parts) == 0 {
		return "s"
	}
	return strings.Join(parts, " and")
}

// listenerAllows returns "" when listener l accepts HTTPRoutes from routeNS,
// else why not.
func listenerAllows(l *gatewayv1.Listener, routeNS, gwNS string, objs *Objects) string {
	ar := l.AllowedRoutes
	if ar != nil && len(ar.Kinds) > 0 {
		if !slices.ContainsFunc(ar.Kinds, func(k gatewayv1.RouteGroupKind) bool {
			return (k.Group == nil || *k.Group == gatewayv1.GroupName) && k.Kind == "HTTPRoute"
		}) {
			return fmt.Sprintf("listener %s does not allow the kind HTTPRoute", l.Name)
		}
	} else if l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType {
		return fmt.Sprintf("listener %s has protocol %s, which does not carry HTTPRoutes", l.Name, l.Protocol)
	}
	from := gatewayv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return ""
	case gatewayv1.NamespacesFromSame:
		if routeNS == gwNS {
			return ""
		}
		return fmt.Sprintf("listener %s allows routes from namespace %s only", l.Name, gwNS)
	case gatewayv1.NamespacesFromSelector:
		s, err := metav1.LabelSelectorAsSelector(sel)
		if sel == nil || err != nil {
			return fmt.Sprintf("listener %s has an invalid namespace selector", l.Name)
		}
		if s.Matches(objs.namespaceLabels(routeNS)) {
			return ""
		}
		return fmt.Sprintf("namespace %s does not match the namespace selector of listener %s", routeNS, l.Name)
	default:
		return fmt.Sprintf("listener %s allows routes from no namespace (%s)", l.Name, from)
	}
}

// backendCheck is the outcome of checking all backend references of a route.
type backendCheck struct {
	condition Condition
	// refs maps each checked reference to the ResolvedRefs reason it failed
	// with ("" when it resolved).
	refs map[*gatewayv1.BackendObjectReference]string
}

func checkBackendRefs(route *gatewayv1.HTTPRoute, objs *Objects) backendCheck {
	bc := backendCheck{refs: map[*gatewayv1.BackendObjectReference]string{}}
	var problems []refProblem
	check := func(path string, ref *gatewayv1.BackendObjectReference, mirror bool) {
		reason, msg := checkBackendRef(route.Namespace, ref, objs)
		bc.refs[ref] = string(reason)
		if reason != "" {
			problems = append(problems, refProblem{path, reason, msg, mirror})
		}
	}
	for i := range route.Spec.Rules {
		r := &route.Spec.Rules[i]
		for j := range r.BackendRefs {
			check(backendRefPath(i, j), &r.BackendRefs[j].BackendObjectReference, false)
		}
		for j := range r.Filters {
			if m := r.Filters[j].RequestMirror; m != nil {
				check(mirrorRefPath(i, j), &m.BackendRef, true)
			}
		}
	}
	bc.condition = resolvedRefsCondition(problems)
	return bc
}

// backendRefPath and mirrorRefPath are the spec paths of a rule's
// backendRef and of a mirror filter's backendRef.
func backendRefPath(rule, ref int) string {
	return fmt.Sprintf("spec.rules[%d].backendRefs[%d]", rule, ref)
}
func mirrorRefPath(rule, filter int) string {
	return fmt.Sprintf("spec.rules[%d].filters[%d].requestMirror.backendRef", rule, filter)
}

// refProblem is a backend reference that does not resolve: its spec path,
// the ResolvedRefs reason, what is wrong, and whether it is a mirror
// filter's (whose requests are still served; only their copies are not
// sent).
type refProblem struct {
	path   string
	reason gatewayv1.RouteConditionReason
	msg    string
	mirror bool
}

// resolvedRefsCondition is the route's ResolvedRefs condition for the
// references that do not resolve (in spec order): True when there are
// none, else False with the first one's reason and every one's message.
func resolvedRefsCondition(problems []refProblem) Condition {
	c := Condition{
		Type:    string(gatewayv1.RouteConditionResolvedRefs),
		Status:  string(metav1.ConditionTrue),
		Reason:  string(gatewayv1.RouteReasonResolvedRefs),
		Message: "all backend references resolved",
	}
	if len(problems) == 0 {
		return c
	}
	msgs := make([]string, len(problems))
	var backends, mirrors bool
	for i, p := range problems {
		msgs[i] = p.path + ": " + p.msg
		mirrors = mirrors || p.mirror
		backends = backends || !p.mirror
	}
	switch {
	case backends && mirrors:
		msgs = append(msgs, "requests for these backendRefs get 500, and no copies go to these mirrors, while they do not resolve")
	case mirrors:
		msgs = append(msgs, "no copies of requests go to these mirrors while they do not resolve; the requests are served")
	default:
		msgs = append(msgs, "requests for these backends get 500 while they do not resolve")
	}
	c.Status = string(metav1.ConditionFalse)
	c.Reason = string(problems[0].reason)
	c.Message = status.TruncateMessage(strings.Join(msgs, "; "))
	return c
}

// ResolvedRefs is the ResolvedRefs condition of the fragment's route with
// its backend references checked again, by the rules Attach checks them
// with, against objs: the Services and ReferenceGrants of now. It is the
// condition Attach would give the route now, so that what the chaperone
// writes between applies and what the provider writes at an apply agree.
// When every reference resolves as it did at attach time, it is the
// fragment's own condition, message included. A reference of a kind other
// than Service stays unresolved (InvalidKind; its message then no longer
// names the kind, which the fragment does not keep).
//
// ok is false when the fragment has no rules (the route is not accepted,
// so its references are not in the fragment): its condition is the
// fragment's.
func (f *Fragment) ResolvedRefs(objs *Objects) (c Condition, ok bool) {
	if f == nil || len(f.Rules) == 0 {
		return Condition{}, false
	}
	var problems []refProblem
	same := true
	check := func(path string, b BackendRef, mirror bool) {
		var reason gatewayv1.RouteConditionReason
		var msg string
		if b.Unresolved == string(gatewayv1.RouteReasonInvalidKind) {
			reason, msg = gatewayv1.RouteReasonInvalidKind, "the kind is not supported: only core Services are"
		} else {
			ns, port := gatewayv1.Namespace(b.Namespace), gatewayv1.PortNumber(b.Port)
			ref := gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(b.Name), Namespace: &ns, Port: &port}
			reason, msg = checkBackendRef(f.Route.Namespace, &ref, objs)
		}
		if string(reason) != b.Unresolved {
			same = false
		}
		if reason != "" {
			problems = append(problems, refProblem{path, reason, msg, mirror})
		}
	}
	for _, r := range f.Rules {
		for j, b := range r.Backends {
			check(backendRefPath(r.Index, j), b, false)
		}
		for j, fl := range r.Filters {
			if fl.RequestMirror != nil {
				check(mirrorRefPath(r.Index, j), fl.RequestMirror.Backend, true)
			}
		}
	}
	if same {
		for _, p := range f.Parents {
			for _, pc := range p.Conditions {
				if pc.Type == string(gatewayv1.RouteConditionResolvedRefs) {
					return pc, true
				}
			}
		}
	}
	return resolvedRefsCondition(problems), true
}

// checkBackendRef returns the ResolvedRefs reason and message for one
// reference, or "" when it resolves.
func checkBackendRef(routeNS string, ref *gatewayv1.BackendObjectReference, objs *Objects) (gatewayv1.RouteConditionReason, string) {
	if !isServiceRef(ref.Group, ref.Kind) {
		g, k := "", "Service"
		if ref.Group != nil {
			g = string(*ref.Group)
		}
		if ref.Kind != nil {
			k = string(*ref.Kind)
		}
		return gatewayv1.RouteReasonInvalidKind, fmt.Sprintf("kind %q in group %q is not supported: only core Services are", k, g)
	}
	ns := routeNS
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	if ns != routeNS && (objs == nil || !refPermitted(objs.ReferenceGrants, routeNS, ns, string(ref.Name))) {
		return gatewayv1.RouteReasonRefNotPermitted, fmt.Sprintf("Service %s/%s is in another namespace and no ReferenceGrant in %s allows HTTPRoutes from %s to reference it", ns, ref.Name, ns, routeNS)
	}
	svc := objs.service(ns, string(ref.Name))
	if svc == nil {
		return gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s not found", ns, ref.Name)
	}
	if why := externalNameRefused(svc, objs); why != "" {
		return gatewayv1.RouteReasonBackendNotFound, why
	}
	if ref.Port != nil && !servicePortOK(svc, *ref.Port) {
		return gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s has no port %d", ns, ref.Name, *ref.Port)
	}
	if ref.Port != nil {
		if why := unsupportedProtocol(svc, *ref.Port); why != "" {
			return gatewayv1.RouteReasonUnsupportedProtocol, why
		}
	}
	return "", ""
}

// externalNameDenied reports whether svc is an ExternalName Service that
// the Gateway's class does not allow as a backend.
func externalNameDenied(svc *corev1.Service, objs *Objects) bool {
	return svc != nil && svc.Spec.Type == corev1.ServiceTypeExternalName && (objs == nil || !objs.ExternalNameServices)
}

// externalNameRefused explains why svc, an ExternalName Service, is not a
// backend of a Gateway whose class does not allow them; "" for any other
// Service, or when the class allows them.
func externalNameRefused(svc *corev1.Service, objs *Objects) string {
	if !externalNameDenied(svc, objs) {
		return ""
	}
	return fmt.Sprintf("Service %s/%s is of type ExternalName (%s), which this Gateway's class does not route to: "+
		"set external_name_services = true on its varnishgw_gateway_class to have the gateway pods resolve the name "+
		"through DNS (see docs/guides/external-name-services.md for the risk), or use a Service with endpoints",
		svc.Namespace, svc.Name, svc.Spec.ExternalName)
}

// servicePortOK reports whether a backendRef's port is one of the
// Service's ports. An ExternalName Service that lists no ports takes any:
// Kubernetes does not use them, and the gateway connects to the
// backendRef's port.
func servicePortOK(svc *corev1.Service, port int32) bool {
	if svc.Spec.Type == corev1.ServiceTypeExternalName && len(svc.Spec.Ports) == 0 {
		return true
	}
	return slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
}

// ExternalNameHost is the DNS name of an ExternalName Service as the
// chaperone looks it up and Objects.ExternalNames is keyed: lower case,
// without a trailing dot; "" for other Services.
func ExternalNameHost(svc *corev1.Service) string {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeExternalName {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(svc.Spec.ExternalName), ".")
}

// ExternalNameHosts lists, sorted and once each, the DNS names of the
// ExternalName Services that the fragments' backends and mirrors reference
// and may reach (same namespace, or a ReferenceGrant in objs): what the
// chaperone resolves into objs.ExternalNames. None when objs does not
// allow ExternalName Services.
func ExternalNameHosts(frags []*Fragment, objs *Objects) []string {
	if objs == nil || !objs.ExternalNameServices {
		return nil
	}
	set := map[string]bool{}
	add := func(routeNS string, b BackendRef) {
		if b.Unresolved == string(gatewayv1.RouteReasonInvalidKind) {
			return
		}
		if b.Namespace != routeNS && !refPermitted(objs.ReferenceGrants, routeNS, b.Namespace, b.Name) {
			return
		}
		if h := ExternalNameHost(objs.service(b.Namespace, b.Name)); h != "" {
			set[h] = true
		}
	}
	for _, f := range frags {
		if f == nil {
			continue
		}
		for _, r := range f.Rules {
			for _, b := range r.Backends {
				add(f.Route.Namespace, b)
			}
			for _, fl := range r.Filters {
				if fl.RequestMirror != nil {
					add(f.Route.Namespace, fl.RequestMirror.Backend)
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for h := range set {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// normalizeRules converts the validated spec rules to fragment rules.
func normalizeRules(route *gatewayv1.HTTPRoute, refs map[*gatewayv1.BackendObjectReference]string) []Rule {
	if len(route.Spec.Rules) == 0 {
		// The CRD default: one rule matching PathPrefix "/" without
		// backends, answered with 500.
		return []Rule{{Matches: []ghostjson.Match{{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: "/"}}}}}
	}
	rules := make([]Rule, 0, len(route.Spec.Rules))
	for i := range route.Spec.Rules {
		r := &route.Spec.Rules[i]
		out := Rule{Index: i}
		if r.Name != nil {
			out.Name = string(*r.Name)
		}
		if len(r.Matches) == 0 {
			out.Matches = []ghostjson.Match{{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: "/"}}}
		}
		for j := range r.Matches {
			out.Matches = append(out.Matches, normalizeMatch(&r.Matches[j]))
		}
		for j := range r.Filters {
			out.Filters = append(out.Filters, normalizeFilter(route.Namespace, &r.Filters[j], refs))
		}
		if t := r.Timeouts; t != nil {
			req, _ := parseDuration(nil, t.Request)
			be, _ := parseDuration(nil, t.BackendRequest)
			if req > 0 || be > 0 {
				out.Timeouts = &ghostjson.Timeouts{RequestMs: req.Milliseconds(), BackendRequestMs: be.Milliseconds()}
			}
		}
		out.Retry = normalizeRetry(r.Retry)
		out.SessionPersistence = normalizeSessionPersistence(route.Namespace, route.Name, i, out.Name, r.SessionPersistence)
		for j := range r.BackendRefs {
			b := &r.BackendRefs[j]
			br := backendRef(route.Namespace, &b.BackendObjectReference, refs)
			br.Weight = 1
			if b.Weight != nil {
				br.Weight = *b.Weight
			}
			for k := range b.Filters {
				br.Filters = append(br.Filters, normalizeFilter(route.Namespace, &b.Filters[k], refs))
			}
			out.Backends = append(out.Backends, br)
		}
		rules = append(rules, out)
	}
	return rules
}

func backendRef(routeNS string, ref *gatewayv1.BackendObjectReference, refs map[*gatewayv1.BackendObjectReference]string) BackendRef {
	br := BackendRef{Namespace: routeNS, Name: string(ref.Name), Unresolved: refs[ref]}
	if ref.Namespace != nil {
		br.Namespace = string(*ref.Namespace)
	}
	if ref.Port != nil {
		br.Port = *ref.Port
	}
	if br.Port == 0 {
		// Only non-Service references (InvalidKind) may lack a port; the
		// group is unresolvable anyway, the port keeps the format valid.
		br.Port = 1
	}
	return br
}

func normalizeFilter(routeNS string, f *gatewayv1.HTTPRouteFilter, refs map[*gatewayv1.BackendObjectReference]string) Filter {
	out := Filter{Type: string(f.Type)}
	headers := func(h *gatewayv1.HTTPHeaderFilter) *ghostjson.HeaderModifier {
		hm := &ghostjson.HeaderModifier{Remove: slices.Clone(h.Remove)}
		for _, v := range h.Set {
			hm.Set = append(hm.Set, ghostjson.HeaderValue{Name: string(v.Name), Value: v.Value})
		}
		for _, v := range h.Add {
			hm.Add = append(hm.Add, ghostjson.HeaderValue{Name: string(v.Name), Value: v.Value})
		}
		return hm
	}
	path := func(m *gatewayv1.HTTPPathModifier) *ghostjson.PathModifier {
		if m == nil {
			return nil
		}
		if m.Type == gatewayv1.FullPathHTTPPathModifier {
			return &ghostjson.PathModifier{Type: ghostjson.ReplaceFullPath, Value: *m.ReplaceFullPath}
		}
		return &ghostjson.PathModifier{Type: ghostjson.ReplacePrefixMatch, Value: *m.ReplacePrefixMatch}
	}
	switch f.Type {
	case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
		out.RequestHeaderModifier = headers(f.RequestHeaderModifier)
	case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
		out.ResponseHeaderModifier = headers(f.ResponseHeaderModifier)
	case gatewayv1.HTTPRouteFilterRequestRedirect:
		rd := f.RequestRedirect
		r := &ghostjson.Redirect{Path: path(rd.Path), StatusCode: 302}
		if rd.Scheme != nil {
			r.Scheme = *rd.Scheme
		}
		if rd.Hostname != nil {
			r.Hostname = string(*rd.Hostname)
		}
		if rd.Port != nil {
			r.Port = *rd.Port
		}
		if rd.StatusCode != nil {
			r.StatusCode = *rd.StatusCode
		}
		out.RequestRedirect = r
	case gatewayv1.HTTPRouteFilterURLRewrite:
		rw := &ghostjson.Rewrite{Path: path(f.URLRewrite.Path)}
		if f.URLRewrite.Hostname != nil {
			rw.Hostname = string(*f.URLRewrite.Hostname)
		}
		out.URLRewrite = rw
	case gatewayv1.HTTPRouteFilterRequestMirror:
		m := f.RequestMirror
		mr := &MirrorRef{Backend: backendRef(routeNS, &m.BackendRef, refs)}
		mr.Backend.Weight = 1
		if m.Percent != nil {
			p := *m.Percent
			mr.Percent = &p
		} else if m.Fraction != nil {
			p, _ := fractionPercent(m.Fraction)
			mr.Percent = &p
		}
		out.RequestMirror = mr
	case gatewayv1.HTTPRouteFilterCORS:
		out.CORS = normalizeCORS(f.CORS)
	}
	return out
}

// DefaultRetryAttempts is the number of retries of a retry policy that
// does not say (HTTPRouteRetry attempts is implementation-specific when
// unset).
const DefaultRetryAttempts = 1

// normalizeRetry converts a validated retry policy for ghost.json: attempts
// default to DefaultRetryAttempts, no backoff means none, the codes keep
// their order.
func normalizeRetry(rt *gatewayv1.HTTPRouteRetry) *ghostjson.Retry {
	if rt == nil {
		return nil
	}
	out := &ghostjson.Retry{Attempts: DefaultRetryAttempts}
	if rt.Attempts != nil {
		out.Attempts = *rt.Attempts
	}
	b, _ := parseDuration(nil, rt.Backoff)
	out.BackoffMs = b.Milliseconds()
	for _, c := range rt.Codes {
		out.Codes = append(out.Codes, int(c))
	}
	return out
}
