package routing

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// ErrNotParent is returned by Attach when no parentRef of the route names
// the Gateway.
var ErrNotParent = errors.New("the route has no parentRef to this Gateway")

// maxMessage bounds condition messages (metav1.Condition allows 32768).
const maxMessage = 32768

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
	// ReferenceGrants allow cross-namespace backendRefs.
	ReferenceGrants []*gatewayv1.ReferenceGrant
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
	sets := map[ObjectRef]bool{}
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
		Gateway: ObjectRef{Namespace: gw.Namespace, Name: gw.Name},
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
				Message: truncate(specErrs.ToAggregate().Error()),
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

func truncate(s string) string {
	if len(s) > maxMessage {
		return strings.ToValidUTF8(s[:maxMessage-3], "") + "..."
	}
	return s
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
func namesListenerSet(pr gatewayv1.ParentReference, routeNS string) (ObjectRef, bool) {
	if pr.Group == nil || *pr.Group != gatewayv1.GroupName || pr.Kind == nil || *pr.Kind != "ListenerSet" {
		return ObjectRef{}, false
	}
	ref := ObjectRef{Namespace: routeNS, Name: string(pr.Name)}
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
func attachParent(gw *gatewayv1.Gateway, set *ObjectRef, pr gatewayv1.ParentReference, routeNS string, routeHosts []string, objs *Objects, attached map[string]map[string]bool, accept bool) Condition {
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
	var first gatewayv1.RouteConditionReason
	var msgs []string
	check := func(path string, ref *gatewayv1.BackendObjectReference) {
		reason, msg := checkBackendRef(route.Namespace, ref, objs)
		bc.refs[ref] = string(reason)
		if reason != "" {
			if first == "" {
				first = reason
			}
			msgs = append(msgs, path+": "+msg)
		}
	}
	for i := range route.Spec.Rules {
		r := &route.Spec.Rules[i]
		for j := range r.BackendRefs {
			check(fmt.Sprintf("spec.rules[%d].backendRefs[%d]", i, j), &r.BackendRefs[j].BackendObjectReference)
		}
		for j := range r.Filters {
			if m := r.Filters[j].RequestMirror; m != nil {
				check(fmt.Sprintf("spec.rules[%d].filters[%d].requestMirror.backendRef", i, j), &m.BackendRef)
			}
		}
	}
	bc.condition = Condition{
		Type:    string(gatewayv1.RouteConditionResolvedRefs),
		Status:  string(metav1.ConditionTrue),
		Reason:  string(gatewayv1.RouteReasonResolvedRefs),
		Message: "all backend references resolved",
	}
	if first != "" {
		bc.condition.Status = string(metav1.ConditionFalse)
		bc.condition.Reason = string(first)
		bc.condition.Message = truncate(strings.Join(msgs, "; ") + "; requests for these backends get 500 while they do not resolve")
	}
	return bc
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
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s is of type ExternalName, which varnishgw does not route to: use a Service with endpoints", ns, ref.Name)
	}
	if ref.Port != nil && !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == *ref.Port }) {
		return gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s has no port %d", ns, ref.Name, *ref.Port)
	}
	if ref.Port != nil {
		if why := unsupportedProtocol(svc, *ref.Port); why != "" {
			return gatewayv1.RouteReasonUnsupportedProtocol, why
		}
	}
	return "", ""
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
