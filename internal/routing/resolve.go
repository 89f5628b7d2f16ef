package routing

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// Resolve turns a routing table into a ghost.json document, resolving each
// backend reference to the ready endpoints of its Service:
//
//   - the Service port is found by number (the backendRef port); the
//     EndpointSlice port with the same name as that Service port gives the
//     target port;
//   - only endpoints with ready unset or true count; IPv4 and IPv6 slices
//     both count, FQDN slices are ignored; addresses are deduplicated and
//     sorted;
//   - each Service port that routes or mirrors send to is one entry of the
//     document's backends table (sorted by name, namespace/service:port),
//     written once whatever the number of routes; the routes' groups name
//     it. A port the Service lacks or a Service without a ready endpoint
//     gives an entry with no endpoints: ghost answers the groups' share
//     with 500;
//   - an ExternalName Service, when objs.ExternalNameServices allows them,
//     has the addresses of objs.ExternalNames for its ExternalNameHost,
//     each with the backendRef's port (such a Service has no
//     EndpointSlices); no addresses: no endpoints. When they are not
//     allowed the reference is marked unresolved (BackendNotFound), as
//     Attach reports it;
//   - the TLS sockets of the table (HTTPS listeners) are the document's
//     sockets, with their listeners' names and hostnames: ghost answers
//     requests on them with scheme https and checks their TLS server name
//     (SNI) against the Host header. Plain HTTP sockets are not written
//     (ghost's default);
//   - each rule's effective cache policy (EffectiveCache of the table's
//     CacheDefault and the rule's own) is an entry of the document's
//     cachePolicies that its routes name: "gateway" when it is the
//     Gateway's default unchanged, else "<namespace>/<route>/<rule>" of the
//     first rule (in file order) with that policy, so that identical
//     policies share one entry; a rule whose requests are passed names
//     none;
//   - a reference of a kind other than Service (InvalidKind), a
//     cross-namespace reference without a ReferenceGrant now
//     (RefNotPermitted) or to a Service that does not exist now
//     (BackendNotFound), or to a Service port whose appProtocol Varnish
//     cannot speak (UnsupportedProtocol: kubernetes.io/h2c and
//     kubernetes.io/wss), is marked unresolved with that reason and has no
//     entry: ghost answers its share with 500, whatever the table holds.
//
// With nil objs nothing is looked up (the varnishgw_routing data source
// without resolve_endpoints): every reference but an InvalidKind one names
// an entry of the table, and every entry has no endpoints.
//
// Resolve is pure and deterministic: the same table and objects always
// give a document that ghostjson.Marshal writes byte for byte the same.
// The document shares filters, timeouts and endpoint lists with the table
// and between routes: treat it as read-only.
func Resolve(t *Table, objs *Objects) (*ghostjson.Document, error) {
	if t == nil {
		return nil, fmt.Errorf("resolve: nil table")
	}
	r := newResolver(objs)
	doc := &ghostjson.Document{Version: ghostjson.Version, VHosts: make([]ghostjson.VHost, 0, len(t.VHosts))}
	if t.EscapedSlashes == EscapedSlashesKeep {
		doc.EscapedSlashes = EscapedSlashesKeep // reject, ghost's default, is not written
	}
	for _, s := range t.Sockets {
		if !s.TLS {
			continue
		}
		gs := ghostjson.Socket{Name: s.Name, TLS: true, Listeners: make([]ghostjson.Listener, 0, len(s.Listeners))}
		for _, l := range s.Listeners {
			gs.Listeners = append(gs.Listeners, ghostjson.Listener{Name: l.Name, Hostname: l.Hostname})
		}
		doc.Sockets = append(doc.Sockets, gs)
	}
	// Rules appear in many vhosts; convert each once.
	type ruleOut struct {
		filters  []ghostjson.Filter
		backends []ghostjson.BackendGroup
		cache    string
	}
	cp := newCachePolicies(t.CacheDefault)
	rules := map[*Rule]*ruleOut{}
	// Routes with wildcard hostnames appear in many vhosts; name them once.
	type nameKey struct {
		rule  *Rule
		match int
	}
	names := map[nameKey]string{}
	for _, v := range t.VHosts {
		gv := ghostjson.VHost{Hostname: v.Hostname, Listeners: v.Sockets, Routes: make([]ghostjson.Route, 0, len(v.Routes))}
		for i := range v.Routes {
			tr := &v.Routes[i]
			ro := rules[tr.Rule]
			if ro == nil {
				ro = &ruleOut{backends: make([]ghostjson.BackendGroup, 0, len(tr.Rule.Backends))}
				for _, f := range tr.Rule.Filters {
					ro.filters = append(ro.filters, r.filter(tr.Route.Namespace, f))
				}
				for _, b := range tr.Rule.Backends {
					g := r.group(tr.Route.Namespace, b)
					for _, f := range b.Filters {
						g.Filters = append(g.Filters, r.filter(tr.Route.Namespace, f))
					}
					ro.backends = append(ro.backends, g)
				}
				ro.cache = cp.name(tr.Route, tr.Rule)
				rules[tr.Rule] = ro
			}
			nk := nameKey{tr.Rule, tr.MatchIndex}
			name, ok := names[nk]
			if !ok {
				name = tr.Name()
				names[nk] = name
			}
			gv.Routes = append(gv.Routes, ghostjson.Route{
				Name:            name,
				PrecedenceGroup: tr.Group,
				Match:           *tr.Match(),
				Filters:         ro.filters,
				Timeouts:        tr.Rule.Timeouts,
				Retry:           tr.Rule.Retry,
				Backends:        ro.backends,
				Cache:           ro.cache,
				Session:         ghostSession(*tr.Route, tr.Rule, tr.Match()),
			})
		}
		doc.VHosts = append(doc.VHosts, gv)
	}
	doc.Backends = r.table()
	doc.CachePolicies = cp.table()
	return doc, nil
}

// cachePolicies builds the document's cachePolicies: each distinct
// effective policy once.
type cachePolicies struct {
	def     *CachePolicy           // the Gateway's default as written
	gateway *ghostjson.CachePolicy // its effective policy; nil: passed
	byKey   map[string]string      // policy without its name, as JSON -> name
	out     []ghostjson.CachePolicy
	used    bool // the gateway entry is named by a route
}

func newCachePolicies(def *CachePolicy) *cachePolicies {
	c := &cachePolicies{def: def, byKey: map[string]string{}}
	if g := EffectiveCache(def, nil); g != nil {
		g.Name = GatewayCachePolicyName
		c.gateway = g
		c.byKey[cacheKey(g)] = GatewayCachePolicyName
	}
	return c
}

// name is the name of the rule's effective policy, added to the table if
// new; "" when the rule's requests are passed.
func (c *cachePolicies) name(route *RouteRef, rule *Rule) string {
	var p *ghostjson.CachePolicy
	if rule.Cache == nil {
		p = c.gateway
	} else {
		p = EffectiveCache(c.def, rule.Cache)
	}
	if p == nil {
		return ""
	}
	k := cacheKey(p)
	name, ok := c.byKey[k]
	if !ok {
		q := *p
		q.Name = CachePolicyName(route, rule.Index)
		c.out = append(c.out, q)
		name = q.Name
		c.byKey[k] = name
	}
	if name == GatewayCachePolicyName {
		c.used = true
	}
	return name
}

// table lists the policies named by routes: the Gateway's first, then the
// rules' by name.
func (c *cachePolicies) table() []ghostjson.CachePolicy {
	slices.SortFunc(c.out, func(a, b ghostjson.CachePolicy) int { return strings.Compare(a.Name, b.Name) })
	if c.used {
		return append([]ghostjson.CachePolicy{*c.gateway}, c.out...)
	}
	return c.out
}

// cacheKey is equal for policies equal but for their names.
func cacheKey(p *ghostjson.CachePolicy) string {
	q := *p
	q.Name = ""
	b, _ := json.Marshal(&q) // plain data: cannot fail
	return string(b)
}

type svcPort struct {
	ns, name string
	port     int32
}

type resolver struct {
	objs     *Objects
	services map[nsName]*corev1.Service
	slices   map[nsName][]*discoveryv1.EndpointSlice
	used     map[svcPort]string // the backends table: Service ports sent to, by name
}

func newResolver(objs *Objects) *resolver {
	r := &resolver{
		objs:     objs,
		services: map[nsName]*corev1.Service{},
		slices:   map[nsName][]*discoveryv1.EndpointSlice{},
		used:     map[svcPort]string{},
	}
	if objs == nil {
		return r
	}
	for _, s := range objs.Services {
		if s != nil {
			r.services[nsName{s.Namespace, s.Name}] = s
		}
	}
	for _, es := range objs.EndpointSlices {
		if es == nil {
			continue
		}
		svc := es.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		k := nsName{es.Namespace, svc}
		r.slices[k] = append(r.slices[k], es)
	}
	return r
}

func (r *resolver) filter(routeNS string, f Filter) ghostjson.Filter {
	out := ghostjson.Filter{
		Type:                   f.Type,
		RequestHeaderModifier:  f.RequestHeaderModifier,
		ResponseHeaderModifier: f.ResponseHeaderModifier,
		RequestRedirect:        f.RequestRedirect,
		URLRewrite:             f.URLRewrite,
		CORS:                   f.CORS,
	}
	if m := f.RequestMirror; m != nil {
		g := r.group(routeNS, m.Backend)
		out.RequestMirror = &ghostjson.Mirror{Backend: g.Backend, Unresolved: g.Unresolved, Percent: m.Percent}
	}
	return out
}

// group names the backendRef's Service port in the backends table, or
// marks the reference unresolved.
func (r *resolver) group(routeNS string, b BackendRef) ghostjson.BackendGroup {
	g := ghostjson.BackendGroup{Backend: b.GroupName(), Weight: b.Weight}
	// InvalidKind is final. Other problems found at attach time (a missing
	// Service or ReferenceGrant) are checked again against the objects of
	// now: the chaperone follows the cluster, so a Service created after
	// the route was applied starts receiving traffic without a re-apply.
	k := svcPort{b.Namespace, b.Name, b.Port}
	switch {
	case b.Unresolved == string(gatewayv1.RouteReasonInvalidKind):
		g.Unresolved = ghostjson.UnresolvedInvalidKind
	case r.objs == nil:
		r.used[k] = g.Backend // not looked up: an entry with no endpoints
	case b.Namespace != routeNS && !refPermitted(r.objs.ReferenceGrants, routeNS, b.Namespace, b.Name):
		g.Unresolved = ghostjson.UnresolvedRefNotPermitted
	case r.services[nsName{b.Namespace, b.Name}] == nil:
		g.Unresolved = ghostjson.UnresolvedBackendNotFound
	case externalNameDenied(r.services[nsName{b.Namespace, b.Name}], r.objs):
		g.Unresolved = ghostjson.UnresolvedBackendNotFound
	case unsupportedProtocol(r.services[nsName{b.Namespace, b.Name}], b.Port) != "":
		g.Unresolved = ghostjson.UnresolvedUnsupportedProtocol
	default:
		r.used[k] = g.Backend
	}
	return g
}

// table is the document's backends table: every Service port a resolved
// reference names, with its endpoints, sorted by name.
func (r *resolver) table() []ghostjson.Backend {
	out := make([]ghostjson.Backend, 0, len(r.used))
	for k, name := range r.used {
		out = append(out, ghostjson.Backend{Name: name, Endpoints: r.endpoints(k), WebSocket: r.websocket(k)})
	}
	slices.SortFunc(out, func(a, b ghostjson.Backend) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// websocket says whether the Service port has appProtocol kubernetes.io/ws,
// the only ports ghost pipes WebSocket upgrades to.
func (r *resolver) websocket(k svcPort) bool {
	svc := r.services[nsName{k.ns, k.name}]
	if svc == nil {
		return false
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == k.port {
			return p.AppProtocol != nil && *p.AppProtocol == WebSocketAppProtocol
		}
	}
	return false
}

// endpoints returns the sorted ready endpoints of a Service port (once per
// Service port: the table has one entry per port).
func (r *resolver) endpoints(k svcPort) []ghostjson.Endpoint {
	eps := []ghostjson.Endpoint{}
	svc := r.services[nsName{k.ns, k.name}]
	if svc == nil {
		return eps
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return r.externalEndpoints(svc, k.port)
	}
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == k.port })
	if i < 0 {
		return eps
	}
	portName := svc.Spec.Ports[i].Name
	type ep struct {
		addr netip.Addr
		port int32
	}
	n := 0
	for _, es := range r.slices[nsName{k.ns, k.name}] {
		for i := range es.Endpoints {
			n += len(es.Endpoints[i].Addresses)
		}
	}
	found := make([]ep, 0, n)
	for _, es := range r.slices[nsName{k.ns, k.name}] {
		if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		var port int32
		for _, p := range es.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == portName && p.Port != nil {
				port = *p.Port
				break
			}
		}
		if port < 1 || port > 65535 {
			continue
		}
		for _, e := range es.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				addr, err := netip.ParseAddr(a)
				if err != nil || addr.Zone() != "" {
					continue
				}
				found = append(found, ep{addr.Unmap(), port})
			}
		}
	}
	slices.SortFunc(found, func(a, b ep) int {
		if c := a.addr.Compare(b.addr); c != 0 {
			return c
		}
		return int(a.port) - int(b.port)
	})
	found = slices.Compact(found)
	eps = make([]ghostjson.Endpoint, len(found))
	for i, e := range found {
		eps[i] = ghostjson.Endpoint{Address: e.addr.String(), Port: e.port}
	}
	return eps
}

// externalEndpoints are the addresses an ExternalName Service's name
// resolved to, with the backendRef's port, sorted and once each.
func (r *resolver) externalEndpoints(svc *corev1.Service, port int32) []ghostjson.Endpoint {
	if r.objs == nil || !r.objs.ExternalNameServices || !servicePortOK(svc, port) {
		return []ghostjson.Endpoint{}
	}
	addrs := make([]netip.Addr, 0, len(r.objs.ExternalNames[ExternalNameHost(svc)]))
	for _, a := range r.objs.ExternalNames[ExternalNameHost(svc)] {
		if a.IsValid() && a.Zone() == "" {
			addrs = append(addrs, a.Unmap())
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	eps := make([]ghostjson.Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = ghostjson.Endpoint{Address: a.String(), Port: port}
	}
	return eps
}
