#
# main.vcl: the ghost preamble for a varnishgw gateway.
#
# varnishd listens on the Gateway's listeners (-a NAME=ADDR:PORT, NAME is
# the listener name used in ghost.json) plus one loopback-only admin
# socket for the chaperone:
#
#   varnishd -a http=:8080 -a ghost-admin=127.0.0.1:8081 -f main.vcl ...
#
# Routes whose ghost.json entry names a cache policy ("cache") are cached
# as the policy says; WebSocket upgrades to kubernetes.io/ws backends
# are piped; everything else is
# passed to the backends. User VCL
# goes between the preamble and the defaults at the end (VCL concatenates
# the subroutines), so it can still return (hash) or (pass) itself.

vcl 4.1;

import ghost;
import proxy;

backend default none;

sub vcl_init {
	new router = ghost.router("/etc/varnish/ghost.json",
	    admin_socket = "ghost-admin");
}

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
	# an absolute-form target (RFC 9112 3.2.2) names the host, and a
	# backend takes it over Host: route by it, forward origin form
	# (varnishd does so only for http:// with a path; 7.1 not https://)
	if (req.url ~ "^(?i)https?://") {
		set req.http.Host = regsub(req.url, "^(?i)https?://([^/?#]*).*$", "\1");
		set req.url = regsub(req.url, "^(?i)https?://[^/?#]*/?", "/");
	}
	# the connection's scheme, whatever the client sent: https behind
	# hitch, whose sockets are the only Unix sockets, http otherwise;
	# never from a PROXY header's SSL TLV, which anyone who reaches a
	# plain listener taking PROXY could send
	if (local.endpoint ~ "^/") {
		set req.http.X-Forwarded-Proto = "https";
	} else {
		set req.http.X-Forwarded-Proto = "http";
	}
	# the TLS server name (SNI) for the 421 check on TLS sockets
	router.sni(proxy.authority());
	if (!router.recv()) {
		# 404 (no vhost / no route), 421 (misdirected), 500 (no
		# usable backend, or a route's regex hit a PCRE2 limit), 3xx
		# (RequestRedirect) or an admin endpoint's answer
		return (synth(router.status()));
	}
	# a client's X-Request-Id ghost kept: set again, so that a client's
	# Connection header naming it cannot take it off the backend request
	if (req.http.X-Request-Id) {
		set req.http.X-Request-Id = req.http.X-Request-Id;
	}
	# routed: req.backend_hint is the chosen endpoint. A WebSocket
	# upgrade to a kubernetes.io/ws backend is piped to it (never looked
	# up or cached); ghost took Upgrade off every other request
	if (router.websocket()) {
		return (pipe);
	}
	# the defaults below look it up when its cache policy allows, else
	# pass
}

sub vcl_pipe {
	# varnishd pipes with Connection: close and no Upgrade header: give
	# the backend the WebSocket handshake back
	if (req.http.Upgrade ~ "(?i)(^|[ ,])websocket($|[ ,])") {
		set bereq.http.Upgrade = req.http.Upgrade;
		set bereq.http.Connection = "Upgrade";
	}
	# a request user VCL pipes never reaches .backend_fetch(): ghost's
	# handoff header stays inside
	unset bereq.http.X-Ghost-Handoff;
}

sub vcl_backend_fetch {
	# what .recv() decided for the backend side (the route's timeout,
	# retry and cache policy) travels in X-Ghost-Handoff: off the bereq;
	# a retry picks its backend again
	router.backend_fetch();
}

sub vcl_backend_response {
	# a status the route's retry policy lists is fetched again
	if (router.retry()) {
		return (retry);
	}
}

sub vcl_backend_error {
	# a fetch that failed because a timeout ran out (the route's
	# timeouts.request or timeouts.backendRequest, else varnishd's
	# connect and first-byte timeouts) answers 504, not 503
	router.backend_error();
	# a failed fetch of a route with a retry policy is fetched again
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

# --- user VCL goes here ---

# --- defaults: what user VCL did not decide ---

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
