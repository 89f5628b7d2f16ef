package routing

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// Table is the merged routing table of one Gateway: what Resolve turns into
// ghost.json once backends are resolved to endpoints.
type Table struct {
	Gateway object.Ref
	// Sockets are the Gateway's listener sockets (ghostjson.SocketName), sorted by
	// port, each with the listeners it serves.
	Sockets []TableSocket
	// VHosts are sorted by hostname, then by their first socket.
	VHosts []TableVHost
	// Conflicts lists everything Merge could not apply as written.
	Conflicts []Conflict
	// CacheDefault is the Gateway's default cache policy
	// (CachePolicyAnnotation); nil: none.
	CacheDefault *CachePolicy
	// EscapedSlashes is what a request path's %2F or %5C does
	// (EscapedSlashesAnnotation): EscapedSlashesReject or
	// EscapedSlashesKeep.
	EscapedSlashes string
}

// TableSocket is one listener socket: every served listener of the
// Gateway on one port. HTTP and HTTPS listeners never share a port
// (ValidateGateway), so a socket is plain HTTP or TLS.
type TableSocket struct {
	// Name is the ghostjson.SocketName of Port.
	Name string
	Port int32
	// TLS is set for the port of HTTPS listeners: TLS is terminated in
	// front of varnishd (hitch), which hands the connections to this
	// socket with the PROXY protocol. ghost answers them with scheme
	// https and checks the TLS server name (SNI) against the Host header
	// (design/routing.md, "HTTPS listeners").
	TLS bool
	// Listeners are the served listeners of the port, in spec order.
	Listeners []TableListener
}

// TableListener is one Gateway listener of a socket.
type TableListener struct {
	Name string
	// Hostname is the listener's hostname in lower case; "" when it has
	// none (every host).
	Hostname string
}

// TableVHost is the route list for one hostname on a set of sockets.
type TableVHost struct {
	Hostname string
	// Sockets are ghostjson.SocketName values, sorted by port.
	Sockets []string
	// Routes are in the order ghost expects (see ComparePrecedence).
	Routes []TableRoute
}

// TableRoute is one match of one rule of one route.
type TableRoute struct {
	Route      *RouteRef
	Rule       *Rule
	MatchIndex int
	// HostRank is the specificity of the route hostname that made the
	// route apply to this vhost (higher is more specific).
	HostRank int
	// Group is the ghost.json precedenceGroup: the rank of HostRank among
	// the distinct HostRanks of the vhost's routes, 0 for the most
	// specific. ghost compares it before the match precedence.
	Group int
}

// Name is the ghost.json route name: namespace/route/rule/match.
func (r *TableRoute) Name() string {
	b := make([]byte, 0, len(r.Route.Namespace)+len(r.Route.Name)+8)
	b = append(b, r.Route.Namespace...)
	b = append(b, '/')
	b = append(b, r.Route.Name...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(r.Rule.Index), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(r.MatchIndex), 10)
	return string(b)
}

// Match is the route's match.
func (r *TableRoute) Match() *ghostjson.Match { return &r.Rule.Matches[r.MatchIndex] }

// Conflict is something Merge reports instead of dropping silently: a
// fragment it could not use, or a match shadowed by an identical match that
// takes precedence.
type Conflict struct {
	// Route is the route (namespace/name or ghost route name) that loses.
	Route string
	// Winner is the route that takes precedence, if any.
	Winner string
	// Hostname and Socket locate a shadowed match.
	Hostname, Socket string
	Message          string
}

func (c Conflict) String() string {
	s := c.Route + ": " + c.Message
	if c.Hostname != "" {
		s += fmt.Sprintf(" (hostname %s, socket %s)", c.Hostname, c.Socket)
	}
	return s
}

// ComparePrecedence orders two matches by the Gateway API match precedence
// (GEP-713), most specific first: Exact path before PathPrefix before
// RegularExpression, longer path values first, a method match before none,
// more header matches first, more query parameter matches first. It returns
// 0 for ties; ghost applies the same order as a stable sort, so ties keep
// the file order Merge writes.
func ComparePrecedence(a, b *ghostjson.Match) int {
	rank := func(t string) int {
		switch t {
		case ghostjson.PathExact:
			return 0
		case ghostjson.PathPrefix:
			return 1
		default:
			return 2
		}
	}
	if c := cmp.Compare(rank(a.Path.Type), rank(b.Path.Type)); c != 0 {
		return c
	}
	if a.Path.Type != ghostjson.PathRegularExpression {
		if c := cmp.Compare(len(b.Path.Value), len(a.Path.Value)); c != 0 {
			return c
		}
	}
	if c := boolCmp(b.Method != "", a.Method != ""); c != 0 {
		return c
	}
	if c := cmp.Compare(len(b.Headers), len(a.Headers)); c != 0 {
		return c
	}
	return cmp.Compare(len(b.QueryParams), len(a.QueryParams))
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// compareTableRoutes is the full file order: the hostname precedence of
// the Gateway API first (more specific route hostname first: an exact
// hostname, then longer wildcards, "*" last), then match precedence, then
// GEP-713 ties: creation time, namespace/name, rule index, match index.
// ghost sees the hostname precedence as the precedenceGroup of each route
// (TableRoute.Group), since it re-sorts by match precedence within a group.
func compareTableRoutes(a, b *TableRoute) int {
	if c := cmp.Compare(b.HostRank, a.HostRank); c != 0 {
		return c
	}
	if c := ComparePrecedence(a.Match(), b.Match()); c != 0 {
		return c
	}
	if a.Route != b.Route {
		if c := compareRoutes(a.Route, b.Route); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(a.Rule.Index, b.Rule.Index); c != 0 {
		return c
	}
	return cmp.Compare(a.MatchIndex, b.MatchIndex)
}

// compareRoutes orders routes by creation time, then namespace, then name.
func compareRoutes(a, b *RouteRef) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp); c != 0 {
		return c
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// compareFragments orders fragments like compareRoutes; duplicates of one
// route sort by generation (newest first), then uid, so that Merge picks
// the same one whatever the input order.
func compareFragments(a, b *Fragment) int {
	if c := compareRoutes(&a.Route, &b.Route); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Route.Generation, a.Route.Generation); c != 0 {
		return c
	}
	return strings.Compare(a.Route.UID, b.Route.UID)
}

type socketInfo struct {
	name      string
	listeners []*gatewayv1.Listener
}

// Merge combines the fragments of one Gateway into its routing table. It
// lists the listener sockets (ghostjson.SocketName) with their listeners, the port of
// HTTPS listeners marked TLS (Table.Sockets). For every socket it builds one vhost per hostname that a
// listener or an attached route names there. A vhost belongs to the most
// specific listener on the socket that accepts its hostname and holds only
// that listener's routes (listener isolation): ghost picks the most specific
// vhost for a request host and never falls through. Routes are ordered as
// compareTableRoutes describes. Fragments for another Gateway, duplicate
// fragments, listeners the Gateway no longer has, and matches shadowed by
// an identical match are reported in Table.Conflicts. The Gateway's default
// cache policy (CachePolicyAnnotation) becomes Table.CacheDefault; an
// invalid one is an error naming the annotation and the field, so that the
// routing served so far stays. The fragments must have been validated
// (UnmarshalFragment does).
func Merge(gw *gatewayv1.Gateway, fragments []*Fragment) (*Table, error) {
	if gw == nil {
		return nil, fmt.Errorf("merge: nil Gateway")
	}
	cacheDefault, err := GatewayCachePolicy(gw)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	escapedSlashes, err := GatewayEscapedSlashes(gw)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	t := &Table{Gateway: object.Ref{Namespace: gw.Namespace, Name: gw.Name}, CacheDefault: cacheDefault, EscapedSlashes: escapedSlashes}

	// Sockets and their HTTP listeners.
	sockets := map[int32]*socketInfo{}
	listenerByName := map[string]*gatewayv1.Listener{}
	for i := range gw.Spec.Listeners {
		l := &gw.Spec.Listeners[i]
		if l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType {
			continue
		}
		if l.Hostname != nil && *l.Hostname != "" {
			if errs := validateHostname(field.NewPath("spec", "listeners").Index(i).Child("hostname"), strings.ToLower(string(*l.Hostname)), true); len(errs) > 0 {
				t.Conflicts = append(t.Conflicts, Conflict{Message: fmt.Sprintf("listener %s is not served: %v", l.Name, errs.ToAggregate())})
				continue
			}
		}
		s := sockets[l.Port]
		if s == nil {
			s = &socketInfo{name: ghostjson.SocketName(l.Port)}
			sockets[l.Port] = s
		}
		if len(s.listeners) > 0 && s.listeners[0].Protocol != l.Protocol {
			t.Conflicts = append(t.Conflicts, Conflict{Message: fmt.Sprintf("listener %s uses %s on port %d, where listener %s uses %s: it is not served (one port serves one protocol)", l.Name, l.Protocol, l.Port, s.listeners[0].Name, s.listeners[0].Protocol)})
			continue
		}
		if i := slices.IndexFunc(s.listeners, func(o *gatewayv1.Listener) bool { return listenerHost(o) == listenerHost(l) }); i >= 0 {
			t.Conflicts = append(t.Conflicts, Conflict{Message: fmt.Sprintf("listener %s has the same port (%d) and hostname (%s) as listener %s: it is not served", l.Name, l.Port, listenerHost(l), s.listeners[i].Name)})
			continue
		}
		listenerByName[string(l.Name)] = l
		s.listeners = append(s.listeners, l)
	}

	// Fragments in GEP-713 order; the first of duplicates wins.
	frags := make([]*Fragment, 0, len(fragments))
	for _, f := range fragments {
		if f == nil {
			continue
		}
		if f.Gateway != t.Gateway {
			t.Conflicts = append(t.Conflicts, Conflict{Route: f.Route.String(), Message: fmt.Sprintf("fragment is for Gateway %s, not %s: ignored", f.Gateway, t.Gateway)})
			continue
		}
		if f.Accepted() {
			frags = append(frags, f)
		}
	}
	slices.SortStableFunc(frags, compareFragments)
	seen := map[object.Ref]*Fragment{}
	// byListener[listener][hostname] lists the fragments attached there.
	byListener := map[string]map[string][]*Fragment{}
	for _, f := range frags {
		id := object.Ref{Namespace: f.Route.Namespace, Name: f.Route.Name}
		if prev, dup := seen[id]; dup {
			t.Conflicts = append(t.Conflicts, Conflict{Route: id.String(), Message: fmt.Sprintf("duplicate fragment (uid %q): the fragment with uid %q is used", f.Route.UID, prev.Route.UID)})
			continue
		}
		seen[id] = f
		for _, al := range f.Listeners {
			if _, ok := listenerByName[al.Name]; !ok {
				t.Conflicts = append(t.Conflicts, Conflict{Route: id.String(), Message: fmt.Sprintf("Gateway %s has no HTTP listener %q (any more): the route is not served there; re-apply the route", t.Gateway, al.Name)})
				continue
			}
			m := byListener[al.Name]
			if m == nil {
				m = map[string][]*Fragment{}
				byListener[al.Name] = m
			}
			for _, h := range al.Hostnames {
				m[h] = append(m[h], f)
			}
		}
	}

	ports := make([]int32, 0, len(sockets))
	for p := range sockets {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	t.Sockets = make([]TableSocket, 0, len(ports))
	for _, port := range ports {
		s := sockets[port]
		ts := TableSocket{Name: s.name, Port: port, TLS: s.listeners[0].Protocol == gatewayv1.HTTPSProtocolType}
		for _, l := range s.listeners {
			tl := TableListener{Name: string(l.Name)}
			if h := listenerHost(l); h != anyHost {
				tl.Hostname = h
			}
			ts.Listeners = append(ts.Listeners, tl)
		}
		t.Sockets = append(t.Sockets, ts)
	}
	type built struct {
		hostname string
		socket   string
		routes   []TableRoute
	}
	var all []built
	for _, port := range ports {
		s := sockets[port]
		// Candidate vhost hostnames: every listener hostname (so that a
		// listener without routes still captures its hosts) and every
		// hostname a route was attached with.
		cands := map[string]bool{}
		for _, l := range s.listeners {
			cands[listenerHost(l)] = true
			for h := range byListener[string(l.Name)] {
				cands[h] = true
			}
		}
		hosts := make([]string, 0, len(cands))
		for h := range cands {
			hosts = append(hosts, h)
		}
		slices.Sort(hosts)
		for _, h := range hosts {
			owner := mostSpecificListener(s.listeners, h)
			b := built{hostname: h, socket: s.name}
			if owner != nil {
				b.routes = vhostRoutes(byListener[string(owner.Name)], h)
			}
			t.Conflicts = append(t.Conflicts, shadowed(b.routes, h, s.name)...)
			all = append(all, b)
		}
	}

	// One vhost per hostname and identical route list, across sockets.
	slices.SortStableFunc(all, func(a, b built) int { return strings.Compare(a.hostname, b.hostname) })
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].hostname == all[i].hostname {
			j++
		}
		group := all[i:j]
		used := make([]bool, len(group))
		for a := range group {
			if used[a] {
				continue
			}
			v := TableVHost{Hostname: group[a].hostname, Sockets: []string{group[a].socket}, Routes: group[a].routes}
			for b := a + 1; b < len(group); b++ {
				if !used[b] && sameRoutes(group[a].routes, group[b].routes) {
					used[b] = true
					v.Sockets = append(v.Sockets, group[b].socket)
				}
			}
			t.VHosts = append(t.VHosts, v)
		}
		i = j
	}
	slices.SortStableFunc(t.Conflicts, func(a, b Conflict) int {
		return cmp.Or(strings.Compare(a.Route, b.Route), strings.Compare(a.Hostname, b.Hostname),
			strings.Compare(a.Socket, b.Socket), strings.Compare(a.Message, b.Message))
	})
	return t, nil
}

func listenerHost(l *gatewayv1.Listener) string {
	if l.Hostname == nil || *l.Hostname == "" {
		return anyHost
	}
	return strings.ToLower(string(*l.Hostname))
}

// mostSpecificListener returns the listener whose hostname matches h most
// specifically (exact, then the longest wildcard, then none), or nil.
func mostSpecificListener(ls []*gatewayv1.Listener, h string) *gatewayv1.Listener {
	var best *gatewayv1.Listener
	bestRank := -1
	for _, l := range ls {
		lh := listenerHost(l)
		if lh != h && !hostMatches(lh, h) {
			continue
		}
		if r := hostSpecificity(lh); r > bestRank {
			best, bestRank = l, r
		}
	}
	return best
}

// vhostRoutes lists, in file order, the matches of the fragments attached to
// one listener with a hostname that applies to vhost hostname h.
func vhostRoutes(byHost map[string][]*Fragment, h string) []TableRoute {
	if len(byHost) == 0 {
		return nil
	}
	rank := map[*Fragment]int{}
	var order []*Fragment
	for _, p := range coveringPatterns(h) {
		for _, f := range byHost[p] {
			if _, ok := rank[f]; !ok {
				rank[f] = hostSpecificity(p)
				order = append(order, f)
			}
		}
	}
	n := 0
	for _, f := range order {
		for i := range f.Rules {
			n += len(f.Rules[i].Matches)
		}
	}
	out := make([]TableRoute, 0, n)
	for _, f := range order {
		for i := range f.Rules {
			r := &f.Rules[i]
			for j := range r.Matches {
				out = append(out, TableRoute{Route: &f.Route, Rule: r, MatchIndex: j, HostRank: rank[f]})
			}
		}
	}
	slices.SortFunc(out, func(a, b TableRoute) int { return compareTableRoutes(&a, &b) })
	for i := 1; i < len(out); i++ {
		out[i].Group = out[i-1].Group
		if out[i].HostRank != out[i-1].HostRank {
			out[i].Group++
		}
	}
	return out
}

func sameRoutes(a, b []TableRoute) bool {
	return slices.EqualFunc(a, b, func(x, y TableRoute) bool {
		return x.Rule == y.Rule && x.MatchIndex == y.MatchIndex && x.HostRank == y.HostRank
	})
}

// shadowed reports matches that are identical to a match earlier in the
// (sorted) route list: ghost never uses them. An identical match in a later
// precedence group is shadowed too: the routes are looked at in match
// precedence order, ties in file order.
func shadowed(routes []TableRoute, hostname, socket string) []Conflict {
	if n := len(routes); n > 1 && routes[0].Group != routes[n-1].Group {
		routes = slices.Clone(routes)
		slices.SortStableFunc(routes, func(a, b TableRoute) int { return ComparePrecedence(a.Match(), b.Match()) })
	}
	var out []Conflict
	for start := 0; start < len(routes); {
		end := start + 1
		for end < len(routes) && ComparePrecedence(routes[start].Match(), routes[end].Match()) == 0 {
			end++
		}
		report := func(w, i int) {
			win, cur := &routes[w], &routes[i]
			out = append(out, Conflict{
				Route: cur.Name(), Winner: win.Name(), Hostname: hostname, Socket: socket,
				Message: fmt.Sprintf("match is identical to the match of %s, which takes precedence: it is never used", win.Name()),
			})
		}
		switch n := end - start; {
		case n == 1:
		case n <= 16:
			// Small runs: compare pairwise, without allocating.
			for i := start + 1; i < end; i++ {
				for w := start; w < i; w++ {
					if matchEqual(routes[w].Match(), routes[i].Match()) {
						report(w, i)
						break
					}
				}
			}
		default:
			first := make(map[string]int, n)
			for i := start; i < end; i++ {
				k := matchKey(routes[i].Match())
				if w, seen := first[k]; seen {
					report(w, i)
				} else {
					first[k] = i
				}
			}
		}
		start = end
	}
	return out
}

// matchKey is a string that is equal for equal matches.
func matchKey(m *ghostjson.Match) string {
	var b strings.Builder
	b.Grow(len(m.Path.Value) + 32)
	b.WriteString(m.Path.Type)
	b.WriteByte(0)
	b.WriteString(m.Path.Value)
	b.WriteByte(0)
	b.WriteString(m.Method)
	for _, l := range [][]ghostjson.ValueMatch{m.Headers, m.QueryParams} {
		b.WriteByte(1)
		for _, v := range l {
			b.WriteString(v.Type)
			b.WriteByte(0)
			b.WriteString(v.Name)
			b.WriteByte(0)
			b.WriteString(v.Value)
			b.WriteByte(0)
		}
	}
	return b.String()
}

// matchEqual reports whether two matches are identical.
func matchEqual(a, b *ghostjson.Match) bool {
	return a.Path == b.Path && a.Method == b.Method && slices.Equal(a.Headers, b.Headers) && slices.Equal(a.QueryParams, b.QueryParams)
}
