package routing

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// WebSocketAppProtocol is the Service port appProtocol (GEP-1911) of the
// only backends ghost pipes WebSocket upgrades to: a pipe carries the rest
// of the client connection unrouted, so a backend must say it speaks
// WebSocket. An upgrade to any other port is served as plain HTTP.
const WebSocketAppProtocol = "kubernetes.io/ws"

// Kubernetes standard application protocols (KEP-3726) that a Service
// port's appProtocol can name and Varnish cannot speak to a backend. Every
// other value (none, "http", kubernetes.io/ws, implementation-specific
// names) is sent HTTP/1.1.
var unsupportedAppProtocols = map[string]string{
	"kubernetes.io/h2c": "HTTP/2 without TLS: Varnish talks HTTP/1.1 to backends",
	"kubernetes.io/wss": "WebSocket over TLS: Varnish Cache opens only plain TCP connections to backends",
}

// unsupportedProtocol returns why the Service port numbered port has an
// appProtocol varnishgw cannot send traffic to, or "" when it can (or the
// Service lacks the port, which other checks report).
func unsupportedProtocol(svc *corev1.Service, port int32) string {
	for _, p := range svc.Spec.Ports {
		if p.Port != port || p.AppProtocol == nil {
			continue
		}
		if why, ok := unsupportedAppProtocols[*p.AppProtocol]; ok {
			return fmt.Sprintf("Service %s/%s port %d has appProtocol %q (%s), which varnishgw cannot send traffic to: serve plain HTTP/1.1 or WebSocket (appProtocol kubernetes.io/ws, or none) on that port", svc.Namespace, svc.Name, port, *p.AppProtocol, why)
		}
	}
	return ""
}
