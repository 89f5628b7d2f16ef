#
# main.vcl: the ghost preamble for a varnishgw gateway.
#
# varnishd listens on the Gateway's listeners (-a NAME=ADDR:PORT, NAME is
# the listener name used in ghost.json) plus one loopback-only admin
# socket for the chaperone:
#
#   varnishd -a http=:8080 -a ghost-admin=127.0.0.1:8081 -f main.vcl ...
#
# Everything is passed to the backends (no caching) unless user VCL below
# decides otherwise.

vcl 4.1;

import ghost;

backend default none;

sub vcl_init {
	new router = ghost.router("/etc/varnish/ghost.json",
	    admin_socket = "ghost-admin");
}

sub vcl_recv {
	if (!router.recv()) {
		# 404 (no vhost / no route), 500 (no usable backend),
		# 3xx (RequestRedirect) or an admin endpoint's answer
		return (synth(router.status()));
	}
	# routed: req.backend_hint is the chosen endpoint
	return (pass);
}

sub vcl_synth {
	router.synth();
	return (deliver);
}

sub vcl_deliver {
	router.deliver();
}
