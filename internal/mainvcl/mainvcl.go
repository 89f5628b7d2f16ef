// Package mainvcl renders a gateway's main.vcl: the ghost preamble, then the
// GatewayClass's user VCL, then the Gateway's own VCL. The provider stores
// the result in the Gateway's VCL ConfigMap (gwruntime.VCLConfigMapName, key
// gwruntime.VCLDataKey), which the chaperone watches and hot-reloads.
package mainvcl

import (
	"fmt"
	"net/netip"
	"strings"
)

// Defaults of the pod layout that the preamble refers to.
const (
	// GhostJSON is the ghost.json path main.vcl gives ghost. It is
	// relative: varnishd runs in its working directory (-n, the
	// chaperone's --workdir), so ghost reads WORKDIR/ghost.json, where the
	// chaperone writes it (--ghost-json=WORKDIR/ghost.json). One main.vcl
	// thus serves a supervising pod, a sidecar pod (the work dir is the
	// shared volume) and a chaperone run outside a pod (make demo).
	GhostJSON = "ghost.json"
	// AdminSocket is the name of ghost's loopback admin socket
	// (varnishd -a ghost-admin=127.0.0.1:PORT).
	AdminSocket = "ghost-admin"
)

// Options are the inputs of Render.
type Options struct {
	// ClassVCL is the GatewayClass's user VCL (class parameter user.vcl).
	ClassVCL string
	// GatewayVCL is the Gateway's own VCL (the vcl attribute).
	GatewayVCL string
	// GhostJSON is the ghost.json path; GhostJSON (the constant) when empty.
	GhostJSON string
	// VMOD is the path of libvmod_ghost.so for `import ghost from`; empty
	// imports ghost from varnishd's vmod_path, as in a gateway image.
	VMOD string
	// ProxySources are the only peers (the gateway's
	// proxy_protocol_sources) that may send the PROXY protocol: main.vcl
	// answers 403 and closes the connection to a request on a TCP
	// listener from any other (see proxySourcesVCL). None: no check, as
	// for a gateway whose listeners take no PROXY.
	ProxySources []netip.Prefix
}

// Render returns main.vcl for o. User VCL is appended verbatim after the
// preamble, class first: VCL concatenates subroutines defined more than
// once, so both may define, for example, vcl_backend_response. A leading
// "vcl 4.x;" line in user VCL would be a second version declaration and is
// dropped.
//
// The preamble imports vmod proxy (shipped with varnishd, 7.1 and 7.7
// alike, so it must be in varnishd's vmod_path): its vcl_recv sets
// X-Forwarded-Proto from the connection (https on hitch's Unix sockets,
// http otherwise) and hands ghost the TLS server name
// (router.sni(proxy.authority())) before router.recv(). With
// ProxySources a vcl_recv before the preamble's refuses a PROXY header from
// any other TCP peer (proxySourcesVCL).
//
// The preamble's vcl_recv routes and returns only for requests ghost
// answers itself (404, 500, redirects, its admin endpoints); for routed
// requests it falls through to the user VCL, which may return (hash) or
// (pass) itself. The defaults, after all user VCL, look a request up when
// its route's cache policy (ghost.json cachePolicies, route.cache) allows
// it (router.cacheable()) and pass everything else: a gateway caches
// nothing unless a cache policy or user VCL says so. The defaults'
// vcl_hash hashes ghost's key (router.hash()) and their
// vcl_backend_response applies the policy (TTL, grace, keep, the object
// headers bans match) and skips the builtin VCL when there is one
// (router.backend_response()); the preamble's vcl_backend_fetch takes the
// policy off the backend request (router.backend_fetch()), and its
// vcl_backend_error turns the 503 of a fetch that failed because a timeout
// ran out into 504 Gateway Timeout, as the Gateway API wants for
// timeouts.request and timeouts.backendRequest (router.backend_error()).
// The preamble's vcl_backend_response and vcl_backend_error return
// (retry), varnishd's own retry, when the route's retry policy says so
// (router.retry(): a listed status, or a failed fetch, within the
// policy's attempts and varnishd's max_retries, after its backoff); the
// retry's vcl_backend_fetch picks a backend again by weight.
// Likewise the user's vcl_synth runs after ghost has written its answer,
// before the final deliver.
//
// A WebSocket upgrade request (Upgrade: websocket with Connection: upgrade)
// that ghost routed to a Service port with appProtocol kubernetes.io/ws is
// piped to the endpoint ghost chose, before user VCL (router.websocket()):
// it is never looked up or cached, and the preamble's vcl_pipe hands the
// backend the Upgrade and Connection headers that varnishd's pipe drops.
// ghost removes the Upgrade header and Connection's upgrade token from
// every other request, so a backend that does not speak WebSocket never
// gets a pipe, which would carry the rest of the connection unrouted.
func Render(o Options) string {
	ghostJSON := o.GhostJSON
	if ghostJSON == "" {
		ghostJSON = GhostJSON
	}
	imp := "import ghost;"
	if o.VMOD != "" {
		imp = fmt.Sprintf("import ghost from %q;", o.VMOD)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `vcl 4.1;

# varnishgw main.vcl, rendered by the provider: the ghost preamble, then the
# GatewayClass VCL, then the Gateway VCL. Do not edit: the next apply
# overwrites it.

%s
import proxy;

backend default none;

sub vcl_init {
	new router = ghost.router(%q, admin_socket = %q);
}
%s
# An HTTP/2 request with a connection-specific header field (RFC 9113
# 8.2.2: Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding,
# Upgrade, or TE other than "trailers") is malformed, but varnishd's
# HTTP/2 parser accepts it; it gets 400 here, before routing, so that no
# such field reaches a backend over HTTP/1.1 (request smuggling by
# downgrade) whatever varnishd strips.
sub vcl_recv {
	if (req.proto ~ "^HTTP/2" && (req.http.Connection || req.http.Keep-Alive ||
	    req.http.Proxy-Connection || req.http.Transfer-Encoding || req.http.Upgrade ||
	    (req.http.TE && req.http.TE !~ "(?i)^[ \t]*trailers[ \t]*$"))) {
		return (synth(400, "Connection-specific header field in HTTP/2"));
	}
}

sub vcl_recv {
	# An absolute-form target (http://host/path, RFC 9112 3.2.2) names
	# the host itself, and an HTTP/1.1 backend takes it over Host: route
	# by that host and forward the origin form. varnishd does so itself
	# only for http:// targets with a path (7.1 not for https://).
	if (req.url ~ "^(?i)https?://") {
		set req.http.Host = regsub(req.url, "^(?i)https?://([^/?#]*).*$", "\1");
		set req.url = regsub(req.url, "^(?i)https?://[^/?#]*/?", "/");
	}
	# The scheme of the client's connection, replacing what the client
	# sent: https when it came through hitch, whose sockets are the only
	# Unix sockets (on every HTTPS listener, with hitch's own PROXY header
	# or a load balancer's passed on), http otherwise. Never from a PROXY
	# header's SSL TLV: on a plain listener that takes PROXY anyone who
	# reaches it could claim TLS. varnishd itself appends client.ip to
	# X-Forwarded-For: behind hitch or a load balancer's PROXY header,
	# the real client.
	if (local.endpoint ~ "^/") {
		set req.http.X-Forwarded-Proto = "https";
	} else {
		set req.http.X-Forwarded-Proto = "http";
	}
	# The TLS server name (SNI) hitch passes on: on a TLS socket ghost
	# answers 421 when it selects another listener than the Host.
	router.sni(proxy.authority());
	if (!router.recv()) {
		return (synth(router.status()));
	}
	# ghost keeps a client's well-formed X-Request-Id. varnishd drops
	# the headers a client's Connection header names from the backend
	# request (hop-by-hop), unless VCL set them: set it again, so every
	# backend gets it.
	if (req.http.X-Request-Id) {
		set req.http.X-Request-Id = req.http.X-Request-Id;
	}
	# Routed: req.backend_hint is the endpoint ghost chose. A WebSocket
	# upgrade to a Service port with appProtocol kubernetes.io/ws is piped
	# to it: varnishd relays bytes both ways until one side closes, and it
	# is never looked up or cached. ghost took the Upgrade header off every
	# other request, which goes on as plain HTTP.
	if (router.websocket()) {
		return (pipe);
	}
	# User VCL below may return (hash) or (pass); otherwise the defaults
	# at the end look the request up when its cache policy allows, and
	# pass it otherwise.
}

sub vcl_pipe {
	# varnishd sends a piped request with Connection: close and without
	# the client's Upgrade header: give the backend the WebSocket
	# handshake back.
	if (req.http.Upgrade ~ "(?i)(^|[ ,])websocket($|[ ,])") {
		set bereq.http.Upgrade = req.http.Upgrade;
		set bereq.http.Connection = "Upgrade";
	}
	# A piped request never reaches vcl_backend_fetch: ghost's handoff
	# header (X-Ghost-Handoff, see there) stays inside.
	unset bereq.http.X-Ghost-Handoff;
}

sub vcl_backend_fetch {
	# The route, its timeout and cache policy travel from the client side
	# in X-Ghost-Handoff, which ghost takes off the backend request: the
	# origin never sees it. A retry picks its backend again by the rule's
	# weights.
	router.backend_fetch();
}

sub vcl_backend_response {
	# A status the route's retry policy (HTTPRoute retry.codes) lists is
	# fetched again, after the backoff, while attempts and varnishd's
	# max_retries allow.
	if (router.retry()) {
		return (retry);
	}
}

sub vcl_backend_error {
	# A fetch that failed because a timeout ran out (the route's
	# timeouts.request or timeouts.backendRequest, else varnishd's connect
	# and first-byte timeouts) answers 504 Gateway Timeout; other fetch
	# failures stay varnishd's 503.
	router.backend_error();
	# A route with a retry policy fetches again after a failed fetch
	# (refused or reset connection, timeout), as the Gateway API asks.
	if (router.retry()) {
		return (retry);
	}
}

sub vcl_synth {
	router.synth();
}

sub vcl_deliver {
	router.deliver();
}
`, imp, ghostJSON, AdminSocket, proxySourcesVCL(o.ProxySources))
	section := func(title, src string) {
		src = stripVersion(src)
		if strings.TrimSpace(src) == "" {
			return
		}
		fmt.Fprintf(&b, "\n# --- %s ---\n\n%s", title, src)
		if !strings.HasSuffix(src, "\n") {
			b.WriteString("\n")
		}
	}
	section("GatewayClass VCL", o.ClassVCL)
	section("Gateway VCL", o.GatewayVCL)
	b.WriteString(`
# --- varnishgw defaults: cache per the routes' cache policies, pass the rest, deliver ghost's answers ---

sub vcl_recv {
	if (router.cacheable()) {
		return (hash);
	}
	return (pass);
}

sub vcl_hash {
	router.hash();
	return (lookup);
}

sub vcl_backend_response {
	if (router.backend_response()) {
		return (deliver);
	}
}

sub vcl_synth {
	return (deliver);
}
`)
	return b.String()
}

// proxySourcesACL is the name of main.vcl's ACL of Options.ProxySources.
const proxySourcesACL = "proxy_sources"

// proxySourcesVCL is the ACL of the PROXY protocol's sources and the check
// that goes before the preamble's vcl_recv (VCL runs a subroutine's
// definitions in order), or nothing without sources. remote.ip is the TCP
// peer, the one that sent the PROXY header (client.ip is the address it
// claims). A request on a TCP listener from a peer outside the ACL gets
// 403 and the connection is closed (Connection: close in vcl_synth). Not
// checked: hitch's Unix sockets, whose peer is hitch (remote.ip 0.0.0.0;
// hitch cannot restrict who sends it PROXY, the NetworkPolicy of the HTTPS
// guide does), and ghost's loopback admin socket, which takes no PROXY.
func proxySourcesVCL(sources []netip.Prefix) string {
	if len(sources) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, `
# The load balancers that may send the PROXY protocol
# (proxy_protocol_sources): any other peer of a TCP listener gets 403.
acl %s {
`, proxySourcesACL)
	for _, p := range sources {
		p = p.Masked()
		fmt.Fprintf(&b, "\t\"%s\"/%d;\n", p.Addr(), p.Bits())
	}
	cond := fmt.Sprintf(`local.endpoint !~ "^/" && local.socket != %q && remote.ip !~ %s`, AdminSocket, proxySourcesACL)
	fmt.Fprintf(&b, `}

sub vcl_recv {
	# remote.ip is the TCP peer that sent the PROXY header; client.ip,
	# the address the header claims, is trusted only from the ACL.
	if (%s) {
		return (synth(403, "PROXY protocol from a source not allowed"));
	}
}

sub vcl_synth {
	if (%s) {
		set resp.http.Connection = "close";
	}
}
`, cond, cond)
	return b.String()
}

// ProxySourcesOf returns the PROXY sources of a main.vcl Render wrote
// (Options.ProxySources, masked), nil when it has none or is not
// Render's.
func ProxySourcesOf(vcl string) []netip.Prefix {
	_, rest, ok := strings.Cut(vcl, "\nacl "+proxySourcesACL+" {\n")
	if !ok {
		return nil
	}
	body, _, ok := strings.Cut(rest, "\n}")
	if !ok {
		return nil
	}
	var out []netip.Prefix
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimSuffix(line, ";")
		addr, bits, ok := strings.Cut(line, "/")
		if !ok {
			return nil
		}
		p, err := netip.ParsePrefix(strings.Trim(addr, `"`) + "/" + bits)
		if err != nil {
			return nil
		}
		out = append(out, p)
	}
	return out
}

// stripVersion drops a leading "vcl 4.0;" or "vcl 4.1;" declaration.
func stripVersion(src string) string {
	trimmed := strings.TrimLeft(src, " \t\r\n")
	for _, v := range []string{"vcl 4.0;", "vcl 4.1;"} {
		if strings.HasPrefix(trimmed, v) {
			return strings.TrimLeft(trimmed[len(v):], " \t\r\n")
		}
	}
	return src
}
